package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestLockMetrics runs zkr lock with --metrics-addr and scrapes it while it
// holds: the holdings gauge is 1, the wait histogram has one sample,
// /healthz and /readyz answer 200; a second zkr lock waiting behind it is
// healthy and not ready. Then a partition lets the server expire the
// first one's session, and both its endpoints answer 503, saying why.
func TestLockMetrics(t *testing.T) {
	proxy := zktest.NewProxyT(t, servers(t))
	dir := t.TempDir()
	path := testPath(t, "lock")
	// The command ignores SIGTERM and --grace is long: zkr stays up after
	// the loss, so that the test can ask it.
	p := start(t, []string{"D=" + dir}, "lock", "--servers", proxy.Addr(), "--session-timeout", "3s", "--grace", "5m",
		"--metrics-addr", "127.0.0.1:0", path, "--", "sh", "-c", `trap '' TERM; echo started > "$D/started"; while :; do sleep 0.05; done`)
	base := p.metricsURL()
	eventually(t, 10*time.Second, "the command did not start", func() bool { return fileExists(filepath.Join(dir, "started")) })

	mfs := scrape(t, base+"/metrics")
	if got := value(t, mfs, "zkrecipes_holdings", "recipe", "mutex", "path", path); got != 1 {
		t.Errorf("zkrecipes_holdings = %v while holding, want 1", got)
	}
	if got := value(t, mfs, "zkrecipes_wait_seconds", "recipe", "mutex", "path", path); got != 1 {
		t.Errorf("zkrecipes_wait_seconds has %v samples, want 1", got)
	}
	for _, ep := range []string{"/healthz", "/readyz"} {
		if code, st := health(t, base+ep); code != http.StatusOK || st.Status != "ok" {
			t.Errorf("%s while holding: %d %+v, want 200 ok", ep, code, st)
		}
	}

	// A second contender, on the server directly, waits behind the
	// first: healthy, not ready, counted as waiting.
	q := start(t, nil, "lock", "--metrics-addr", "127.0.0.1:0", path, "--", "true")
	qbase := q.metricsURL()
	zktest.Eventually(t, 10*time.Second, "the second contender's /readyz 503 while it waits", func() error {
		return wantUnavailable(t, qbase+"/readyz", "waiting for the lock on "+path)
	})
	if code, st := health(t, qbase+"/healthz"); code != http.StatusOK {
		t.Errorf("the waiting contender's /healthz: %d %+v, want 200", code, st)
	}
	if got := value(t, scrape(t, qbase+"/metrics"), "zkrecipes_waiting", "recipe", "mutex", "path", path); got != 1 {
		t.Errorf("the waiting contender's zkrecipes_waiting = %v, want 1", got)
	}

	// A partition: zkr's connection is silent, the server expires the
	// session (its lock node goes), then the connection comes back and
	// zkr learns of the expiry.
	proxy.Blackhole()
	zktest.Eventually(t, 10*time.Second, "/healthz 503 once disconnected", func() error {
		return wantUnavailable(t, base+"/healthz", "disconnected")
	})
	conn := admin(t)
	eventually(t, 20*time.Second, "the server did not expire zkr's session", func() bool { return len(children(t, conn, path)) == 0 })
	proxy.Pass()
	for _, ep := range []string{"/healthz", "/readyz"} {
		zktest.Eventually(t, 10*time.Second, ep+" 503 once the session expired", func() error {
			return wantUnavailable(t, base+ep, "expired")
		})
	}
	mfs = scrape(t, base+"/metrics")
	if got := value(t, mfs, "zkrecipes_holdings", "recipe", "mutex", "path", path); got != 0 {
		t.Errorf("zkrecipes_holdings = %v after the loss, want 0", got)
	}
	if got := value(t, mfs, "zkrecipes_client_session_expiries_total"); got != 1 {
		t.Errorf("zkrecipes_client_session_expiries_total = %v, want 1", got)
	}
	if p.exited() {
		t.Fatalf("zkr exited %d before the end; stderr:\n%s", p.code, p.stderr.String())
	}
	// The second contender got the lock once the session expired.
	if code := q.wait(20 * time.Second); code != 0 {
		t.Errorf("the second contender exited %d; stderr:\n%s", code, q.stderr.String())
	}
}

// TestServerMetrics runs zkr server with --metrics-addr: its /metrics has
// ZooKeeper's figures, which follow a client's session and node.
func TestServerMetrics(t *testing.T) {
	srv, addrs := startServer(t, 1, "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	base := srv.metricsURL()
	nodes := value(t, scrape(t, base+"/metrics"), "znode_count")
	if code, st := health(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %+v, want 200", code, st)
	}
	c := client(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	if _, err := c.Create(ctx, "/x", []byte("data"), zkclient.Ephemeral, zkclient.WorldACL(zkclient.PermAll)); err != nil {
		t.Fatal(err)
	}
	mfs := scrape(t, base+"/metrics")
	for name, want := range map[string]float64{"znode_count": nodes + 1, "ephemerals_count": 1, "global_sessions": 1, "num_alive_connections": 1} {
		if got := value(t, mfs, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if _, ok := mfs["go_goroutines"]; !ok {
		t.Errorf("no Go collector metrics (go_goroutines) in the scrape")
	}
}

// TestMetricsAddrRefused: a --metrics-addr that is not HOST:PORT is bad
// input (exit status 2); one in use is an error (1); neither starts the
// command's work.
func TestMetricsAddrRefused(t *testing.T) {
	r := zkr(t, "lock", "--servers", "127.0.0.1:1", "--metrics-addr", "nonsense", "/x", "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--metrics-addr \"nonsense\"") {
		t.Errorf("--metrics-addr nonsense: exit %d, stderr %q; want %d naming the flag", r.code, r.stderr, exitUsage)
	}
	oneLineError(t, r)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r = zkr(t, "watch", "--servers", "127.0.0.1:1", "--metrics-addr", ln.Addr().String(), "/x")
	if r.code != exitFailure || !strings.Contains(r.stderr, "--metrics-addr "+ln.Addr().String()) || strings.Contains(r.stderr, "connect") {
		t.Errorf("--metrics-addr in use: exit %d, stderr %q; want %d naming the flag, before connecting", r.code, r.stderr, exitFailure)
	}
	oneLineError(t, r)
}

// metricsURL waits for the line in which zkr says where it serves metrics
// and returns the base URL ("http://127.0.0.1:PORT").
func (p *proc) metricsURL() string {
	p.t.Helper()
	var url string
	zktest.Eventually(p.t, 10*time.Second, "zkr printed no metrics address", func() error {
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			if _, rest, ok := strings.Cut(l, ": serving metrics on "); ok {
				url, _, _ = strings.Cut(rest, "/metrics ")
				return nil
			}
		}
		if p.exited() {
			return fmt.Errorf("zkr %q exited %d; stderr %q", p.cmd.Args[1:], p.code, p.stderr.String())
		}
		return fmt.Errorf("stderr so far %q", p.stderr.String())
	})
	return url
}

// get GETs url and returns the status code and body.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	c := &http.Client{Timeout: zktest.Bound(10 * time.Second), Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// health GETs a health endpoint and decodes its answer.
func health(t *testing.T, url string) (int, healthStatus) {
	t.Helper()
	code, b := get(t, url)
	var st healthStatus
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("GET %s: %d %q: %v", url, code, b, err)
	}
	return code, st
}

// wantUnavailable returns nil if url answers 503 with a reason saying
// why.
func wantUnavailable(t *testing.T, url, why string) error {
	code, st := health(t, url)
	if code != http.StatusServiceUnavailable || st.Status != "unavailable" || !strings.Contains(st.Reason, why) {
		return fmt.Errorf("%d %+v", code, st)
	}
	return nil
}

// scrape GETs url and parses Prometheus' text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	code, b := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return mfs
}

// value returns the value of the gauge or counter name with the labels
// (name, value pairs), or the sample count of the histogram; 0 if there is
// no such series.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		return 0
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// TestLockMetricsLostNode: when someone deletes zkr lock's node, /readyz
// turns 503 saying the lock was lost, while /healthz stays 200 (the
// session is fine), and the loss is counted with its reason.
func TestLockMetricsLostNode(t *testing.T) {
	conn := admin(t)
	dir := t.TempDir()
	path := testPath(t, "lock")
	p := start(t, []string{"D=" + dir}, "lock", "--grace", "5m", "--metrics-addr", "127.0.0.1:0",
		path, "--", "sh", "-c", `trap '' TERM; echo started > "$D/started"; while :; do sleep 0.05; done`)
	base := p.metricsURL()
	eventually(t, 10*time.Second, "the command did not start", func() bool { return fileExists(filepath.Join(dir, "started")) })
	if code, st := health(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz while holding: %d %+v, want 200", code, st)
	}
	kids := children(t, conn, path)
	if len(kids) != 1 {
		t.Fatalf("lock nodes %v, want one", kids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	if err := conn.Delete(ctx, path+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, 10*time.Second, "/readyz 503 once the lock is lost", func() error {
		return wantUnavailable(t, base+"/readyz", "lost the lock on "+path)
	})
	if code, st := health(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz after the node was deleted: %d %+v, want 200 (the session lives)", code, st)
	}
	mfs := scrape(t, base+"/metrics")
	if got := value(t, mfs, "zkrecipes_losses_total", "recipe", "mutex", "path", path, "reason", "deleted"); got != 1 {
		t.Errorf("zkrecipes_losses_total{reason=deleted} = %v, want 1", got)
	}
	if got := value(t, mfs, "zkrecipes_holdings", "recipe", "mutex", "path", path); got != 0 {
		t.Errorf("zkrecipes_holdings = %v after the loss, want 0", got)
	}
}

// TestMetricsCommandsReady: every command with --metrics-addr serves its
// session's metrics, and /readyz turns 200 once it has what it waits for.
func TestMetricsCommandsReady(t *testing.T) {
	servers(t)
	for _, tt := range []struct {
		name string
		args []string // after the command's name and PATH
	}{
		{"elect", []string{"--id", "a", "--", "sleep", "60"}},
		{"elect", []string{"--observe"}},
		{"join", []string{"--id", "a"}},
		{"register", []string{"api", "--id", "a"}},
		{"watch", nil},
	} {
		t.Run(strings.Join(append([]string{tt.name}, tt.args...), " "), func(t *testing.T) {
			t.Parallel()
			path := testPath(t, tt.name)
			p := start(t, nil, append([]string{tt.name, "--metrics-addr", "127.0.0.1:0", path}, tt.args...)...)
			base := p.metricsURL()
			zktest.Eventually(t, 10*time.Second, "/readyz 200", func() error {
				if code, st := health(t, base+"/readyz"); code != http.StatusOK {
					return fmt.Errorf("%d %+v", code, st)
				}
				return nil
			})
			if got := value(t, scrape(t, base+"/metrics"), "zkrecipes_client_connects_total", "outcome", "ok"); got != 1 {
				t.Errorf("zkrecipes_client_connects_total{outcome=ok} = %v, want 1", got)
			}
		})
	}
}
