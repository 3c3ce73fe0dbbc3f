package prometheus

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/zkrecipes/zkrecipes/internal/interop"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// kazooWatcher, run by Python with kazoo against the server argv[1],
// creates /kazoo with two persistent children and an ephemeral one, and
// sets three watches: a data watch by exists on /kazoo/a, one by get on
// /kazoo/b, and a child watch on /kazoo. It prints READY, and at each line
// read from standard input goes one step on: it changes /kazoo/a (firing
// its watch) and prints FIRED, then it closes its session and prints DONE.
const kazooWatcher = `
import sys, threading
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=5)
zk.start(timeout=10)
zk.ensure_path("/kazoo")
zk.create("/kazoo/a", b"1")
zk.create("/kazoo/b", b"2")
zk.create("/kazoo/e", b"3", ephemeral=True)
fired = threading.Event()
zk.exists("/kazoo/a", watch=lambda ev: fired.set())
zk.get("/kazoo/b", watch=lambda ev: None)
zk.get_children("/kazoo", watch=lambda ev: None)
print("READY", flush=True)
sys.stdin.readline()
zk.set("/kazoo/a", b"x")
if not fired.wait(10):
    sys.exit("the watch on /kazoo/a did not fire")
print("FIRED", flush=True)
sys.stdin.readline()
zk.stop()
zk.close()
print("DONE", flush=True)
`

// TestServerCollectorKazoo scrapes a zkserver's figures over HTTP, in
// Prometheus' text format, while kazoo (ZooKeeper's Python client) creates
// nodes and sets watches on it: znode_count, ephemerals_count, watch_count,
// global_sessions and num_alive_connections follow what kazoo does.
func TestServerCollectorKazoo(t *testing.T) {
	zktest.SkipOrFail(t, zktest.Unavailable(interop.KazooAvailable()))
	zktest.CheckLeaks(t)
	srv := zkserver.RunT(t)
	reg := prom.NewRegistry()
	reg.MustRegister(NewServerCollector(srv))
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(hs.Close)

	before := scrape(t, hs.URL)
	for _, m := range srv.Metrics() {
		mf, ok := before[m.Name]
		if !ok {
			t.Errorf("%s is not exported", m.Name)
			continue
		}
		if mf.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is a %v, want a gauge (as ZooKeeper's provider exports it)", m.Name, mf.GetType())
		}
	}
	nodes := gauge(t, before, "znode_count")

	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(60*time.Second))
	defer cancel()
	py := exec.CommandContext(ctx, interop.Python, "-I", "-c", kazooWatcher, srv.Addr())
	stdin, err := py.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := py.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	py.Stderr = &stderr
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() { // on a failure, before the leak check
		if !waited {
			py.Process.Kill()
			py.Wait()
		}
	})
	out := bufio.NewScanner(stdout)
	step := func(want string) {
		t.Helper()
		if !out.Scan() || out.Text() != want {
			t.Fatalf("kazoo did not print %s (got %q, %v); stderr:\n%s", want, out.Text(), out.Err(), stderr.String())
		}
	}
	expect := func(what string, want map[string]float64) {
		t.Helper()
		zktest.Eventually(t, 10*time.Second, what, func() error {
			mfs := scrape(t, hs.URL)
			for name, v := range want {
				if got := gauge(t, mfs, name); got != v {
					return fmt.Errorf("%s = %v, want %v", name, got, v)
				}
			}
			return nil
		})
	}

	step("READY")
	expect("after kazoo's creates and watches", map[string]float64{
		"znode_count":           nodes + 4,
		"ephemerals_count":      1,
		"watch_count":           3,
		"global_sessions":       1,
		"num_alive_connections": 1,
	})
	if got := gauge(t, scrape(t, hs.URL), "packets_received"); got < 8 {
		t.Errorf("packets_received = %v after kazoo's handshake and 7 requests", got)
	}

	io.WriteString(stdin, "\n")
	step("FIRED")
	expect("after the data watch on /kazoo/a fired", map[string]float64{"watch_count": 2, "znode_count": nodes + 4})

	io.WriteString(stdin, "\n")
	step("DONE")
	waited = true
	if err := py.Wait(); err != nil {
		t.Fatalf("kazoo: %v; stderr:\n%s", err, stderr.String())
	}
	expect("after kazoo closed its session", map[string]float64{
		"znode_count":           nodes + 3,
		"ephemerals_count":      0,
		"watch_count":           0,
		"global_sessions":       0,
		"num_alive_connections": 0,
	})
}

// scrape GETs url (a Prometheus handler) and parses the text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/plain") // the text format, not protobuf
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return mfs
}

// gauge returns the value of the unlabelled gauge name in mfs.
func gauge(t *testing.T, mfs map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok || len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge() == nil {
		t.Fatalf("no gauge %s in the scrape", name)
	}
	return mf.GetMetric()[0].GetGauge().GetValue()
}
