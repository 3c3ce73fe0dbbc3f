package prometheus

import (
	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/zkrecipes/zkrecipes/zkserver"
)

// ServerCollector exports an embedded zkserver's monitoring figures
// ([zkserver.Server.Metrics]) as Prometheus gauges, under the names
// ZooKeeper 3.8's Prometheus metrics provider gives them (znode_count,
// watch_count, num_alive_connections, avg_latency, ...: no namespace, so
// that dashboards and alerts written for ZooKeeper apply). It reads them at
// scrape time, in one call to Metrics: a scrape costs what mntr costs.
type ServerCollector struct {
	srv   *zkserver.Server
	descs map[string]*prom.Desc // by the figure's name
}

// NewServerCollector returns a collector of srv's figures; register it on
// a registry (reg.MustRegister(NewServerCollector(srv))). It may be
// registered before srv starts.
func NewServerCollector(srv *zkserver.Server) *ServerCollector {
	c := &ServerCollector{srv: srv, descs: map[string]*prom.Desc{}}
	for _, m := range srv.Metrics() {
		c.descs[m.Name] = prom.NewDesc(m.Name, m.Help, nil, nil)
	}
	return c
}

// Describe sends the descriptions of the gauges.
func (c *ServerCollector) Describe(ch chan<- *prom.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect sends the current value of each gauge.
func (c *ServerCollector) Collect(ch chan<- prom.Metric) {
	for _, m := range c.srv.Metrics() {
		if d, ok := c.descs[m.Name]; ok {
			ch <- prom.MustNewConstMetric(d, prom.GaugeValue, m.Value)
		}
	}
}
