package prometheus_test

import (
	"fmt"
	"log"

	prom "github.com/prometheus/client_golang/prometheus"

	zkprom "github.com/zkrecipes/zkrecipes/metrics/prometheus"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// NewServerCollector exports an embedded server's figures under the names
// ZooKeeper's Prometheus provider gives them; serve the registry with
// promhttp.HandlerFor.
func ExampleNewServerCollector() {
	srv, err := zkserver.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	reg := prom.NewRegistry()
	reg.MustRegister(zkprom.NewServerCollector(srv))
	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "znode_count" {
			fmt.Println(mf.GetName(), mf.GetType(), mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output: znode_count GAUGE 4
}
