package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
	zkprom "github.com/zkrecipes/zkrecipes/metrics/prometheus"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// metricsShutdownWait bounds the wait for scrapes in progress when the
// command ends.
const metricsShutdownWait = time.Second

// withMetrics gives cmd, a command that runs until interrupted or until
// what it holds is lost, the flag --metrics-addr: while cmd runs, zkr then
// serves /metrics, /healthz and /readyz on that address (see
// metricsServer). sessions says whether cmd works on ZooKeeper sessions
// (false: zkr server), and ready when cmd's /readyz answers 200, for its
// help text ("once the lock is held").
//
// The listener is bound before cmd's own work starts, and its address
// printed on stderr ("zkr lock: serving metrics on http://ADDR/metrics");
// it is shut down when cmd returns.
func (a *app) withMetrics(cmd *cobra.Command, sessions bool, ready string) *cobra.Command {
	var addr string
	cmd.Flags().StringVar(&addr, "metrics-addr", "", "serve Prometheus metrics on http://HOST:PORT/metrics, and /healthz and /readyz (port 0: a free one, printed on stderr); empty: none")
	cmd.Long += "\n\n" + wrap(`With --metrics-addr HOST:PORT, zkr serves on that address, while it runs,
/metrics (Prometheus text format: `+metricsWhat(sessions)+`, and the Go
runtime's and the process's), /healthz (200 while `+healthWhat(sessions)+`,
else 503 saying why) and /readyz (200 `+ready+`, while healthy; else 503
saying why). Both answer a short JSON object: {"status": "ok"} or
{"status": "unavailable", "reason": ...}. Port 0 picks a free port; the
address is printed on stderr before zkr starts its work. See
docs/metrics.md.`, 80)
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if addr == "" {
			return run(cmd, args)
		}
		m, err := startMetrics(addr, sessions)
		if err != nil {
			return err
		}
		defer m.close()
		fmt.Fprintf(a.stderr, "%s: serving metrics on http://%s/metrics (health: /healthz, /readyz)\n", cmd.CommandPath(), m.ln.Addr())
		a.metrics = m
		return run(cmd, args)
	}
	return cmd
}

func metricsWhat(sessions bool) string {
	if sessions {
		return "zkrecipes_ client and recipe metrics, labelled with PATH"
	}
	return "the server's figures under the names ZooKeeper's Prometheus provider gives them, such as znode_count"
}

func healthWhat(sessions bool) string {
	if sessions {
		return "the ZooKeeper session is connected"
	}
	return "the server runs"
}

// wrap folds text's whitespace into lines of at most width columns (a
// longer word gets a line of its own).
func wrap(text string, width int) string {
	var b strings.Builder
	col := 0
	for _, w := range strings.Fields(text) {
		switch {
		case col == 0:
		case col+1+len(w) > width:
			b.WriteByte('\n')
			col = 0
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += len(w)
	}
	return b.String()
}

// metricsServer is what --metrics-addr serves: /metrics from a registry of
// its own, and the health of the command's session (or server) on
// /healthz and /readyz. Its methods may be called on nil (no
// --metrics-addr): they do nothing.
type metricsServer struct {
	reg     *prom.Registry
	metrics *zkprom.Metrics // the sessions' metrics; nil for zkr server
	ln      net.Listener
	hs      *http.Server
	served  chan struct{} // closed when Serve has returned

	mu       sync.Mutex
	session  *zkrecipes.Session // the newest session, nil before the first
	health   func() error       // the health of zkr server, instead of a session's
	ready    bool               // whether the command got what it waits for
	lost     <-chan struct{}    // once ready, closed when that is lost
	notReady string             // why the command is not ready
}

// startMetrics binds addr and serves on it.
func startMetrics(addr string, sessions bool) (*metricsServer, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, usagef("--metrics-addr %q: not HOST:PORT: %v", addr, err)
	}
	m := &metricsServer{reg: prom.NewRegistry(), served: make(chan struct{}), notReady: "starting"}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if sessions {
		// A zkr process works on one PATH: the path label stays bounded.
		var err error
		m.metrics, err = zkprom.New(m.reg, zkprom.Options{PathLabel: func(p string) string { return p }})
		if err != nil {
			return nil, fmt.Errorf("creating the metrics: %w", err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, withCode(exitFailure, fmt.Errorf("--metrics-addr %s: %w", addr, err))
	}
	m.ln = ln
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { answer(w, m.healthy()) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { answer(w, m.readiness()) })
	m.hs = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(m.served)
		m.hs.Serve(ln) // returns when closed
	}()
	return m, nil
}

// close shuts the server down, waiting a little for scrapes in progress.
func (m *metricsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), metricsShutdownWait)
	defer cancel()
	if m.hs.Shutdown(ctx) != nil {
		m.hs.Close()
	}
	<-m.served
}

// sessionOptions returns the options that feed m's metrics from a session.
func (m *metricsServer) sessionOptions() []zkrecipes.SessionOption {
	if m == nil || m.metrics == nil {
		return nil
	}
	return m.metrics.SessionOptions()
}

// connected makes s the session whose health /healthz reports: the newest
// (zkr register opens a new one after an expiry).
func (m *metricsServer) connected(s *zkrecipes.Session) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.session = s
}

// serving exports srv's figures, and makes /healthz report whether it
// runs; /readyz is then ready.
func (m *metricsServer) serving(srv *zkserver.Server) {
	if m == nil {
		return
	}
	m.reg.MustRegister(zkprom.NewServerCollector(srv))
	m.mu.Lock()
	defer m.mu.Unlock()
	m.health = func() error {
		select {
		case <-srv.Failed():
			return fmt.Errorf("the server stopped: %w", srv.Err())
		default:
			return nil
		}
	}
	m.ready, m.lost = true, nil
}

// waiting makes /readyz answer 503 with why: what the command is doing
// ("waiting for the lock on /x").
func (m *metricsServer) waiting(why string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ready, m.notReady = false, why
}

// readyUntil makes /readyz answer 200 (while healthy) until lost is closed
// (never, if nil), then 503 with why.
func (m *metricsServer) readyUntil(lost <-chan struct{}, why string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ready, m.lost, m.notReady = true, lost, why
}

// healthy returns nil if the session (or zkr server) is healthy, else why
// not.
func (m *metricsServer) healthy() error {
	m.mu.Lock()
	s, health := m.session, m.health
	m.mu.Unlock()
	switch {
	case health != nil:
		return health()
	case s == nil:
		return errors.New("not connected to ZooKeeper yet")
	case s.Err() != nil:
		return fmt.Errorf("session 0x%x ended: %w", s.ID(), s.Err())
	case !s.Connected():
		return fmt.Errorf("session 0x%x disconnected from ZooKeeper (%v): it may come back, or expire", s.ID(), s.Client().State())
	}
	return nil
}

// readiness returns nil if the command is healthy and has what it waits
// for, else why not.
func (m *metricsServer) readiness() error {
	if err := m.healthy(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		return errors.New(m.notReady)
	}
	select {
	case <-m.lost:
		return errors.New(m.notReady)
	default:
		return nil
	}
}

// healthStatus is the body of /healthz and /readyz.
type healthStatus struct {
	Status string `json:"status"`           // "ok" or "unavailable"
	Reason string `json:"reason,omitempty"` // why unavailable
}

// answer writes err as /healthz and /readyz answer it: 200 if nil, else
// 503 with the reason.
func answer(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	st, code := healthStatus{Status: "ok"}, http.StatusOK
	if err != nil {
		st, code = healthStatus{Status: "unavailable", Reason: err.Error()}, http.StatusServiceUnavailable
	}
	b, _ := json.Marshal(st) // strings only: cannot fail
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
