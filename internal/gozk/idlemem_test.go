package gozk

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The idle-session memory measurement: a process that opens many
// sessions and keeps them idle, and how much its resident set grew per
// session. It runs in a child process (this test binary, run again with
// idleEnvClient set) so the parent's heap, and the server's, count for
// nothing. The server is zkserver, in the parent: the memory measured is
// the client's; with ZKBENCH_IDLEMEM_ZOOKEEPER=1 it is a real ZooKeeper
// (zktest) instead.
const (
	idleEnvClient   = "ZKBENCH_IDLEMEM_CLIENT"
	idleEnvServers  = "ZKBENCH_IDLEMEM_SERVERS"
	idleEnvSessions = "ZKBENCH_IDLEMEM_SESSIONS"
	idleSessions    = 1000
	// idleLimit is a generous bound on zkclient's resident memory per idle
	// session (the aim is at most 64 KiB), there to catch a regression.
	idleLimit = 128
)

// idleFigures is what a child measured, per session, in KiB.
type idleFigures struct {
	client   string
	sessions int
	rss      float64 // resident set growth after a GC and a pause
	released float64 // the same after the runtime returned free memory to the OS
	heap     float64 // Go heap in use
	stacks   float64 // goroutine stacks in use
	routines float64 // goroutines per session
}

// TestIdleMemory measures the resident memory of 1000 idle sessions of
// zkclient and of go-zookeeper/zk, each in a process of its own, and fails
// if zkclient's passes idleLimit KiB per session:
//
//	go test -run TestIdleMemory -v ./internal/gozk/
func TestIdleMemory(t *testing.T) {
	if client := os.Getenv(idleEnvClient); client != "" {
		idleChild(t, client)
		return
	}
	if raceEnabled {
		t.Skip("the race detector's shadow memory would count as the clients'")
	}
	if testing.Short() {
		t.Skip("opens 2000 sessions")
	}
	figs := measureIdle(t)
	for _, f := range figs {
		t.Logf("%-12s %d idle sessions: %.1f KiB RSS per session (%.1f KiB after releasing free memory to the OS; Go heap %.1f KiB, stacks %.1f KiB, %.0f goroutines)",
			f.client, f.sessions, f.rss, f.released, f.heap, f.stacks, f.routines)
	}
	if f := figs["zkclient"]; f.rss > idleLimit {
		t.Errorf("zkclient: %.1f KiB resident per idle session, more than %d", f.rss, idleLimit)
	}
}

// BenchmarkIdleSessionMemory reports TestIdleMemory's figures as metrics.
func BenchmarkIdleSessionMemory(b *testing.B) {
	if raceEnabled {
		b.Skip("the race detector's shadow memory would count as the clients'")
	}
	figs := measureIdle(b)
	for _, client := range ReadClients {
		b.ReportMetric(figs[client].rss, client+"-KiB/session")
	}
	b.ReportMetric(figs["zkclient"].rss/figs["go-zookeeper"].rss, "vs-go-zookeeper")
}

// measureIdle runs a child for each client against a zkserver of its own.
func measureIdle(tb testing.TB) map[string]idleFigures {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		tb.Skip("needs /proc/self/status (Linux) to read the resident set size")
	}
	addr := ""
	if os.Getenv("ZKBENCH_IDLEMEM_ZOOKEEPER") == "1" {
		addr = zktest.StartT(tb, zktest.Options{}).Addrs()[0]
	} else {
		addr = zkserver.RunT(tb).Addr()
	}
	figs := map[string]idleFigures{}
	for _, client := range ReadClients {
		cmd := exec.Command(os.Args[0], "-test.run=^TestIdleMemory$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), idleEnvClient+"="+client, idleEnvServers+"="+addr,
			idleEnvSessions+"="+strconv.Itoa(idleSessions))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			tb.Fatalf("%s child: %v\n%s%s", client, err, out, stderr.Bytes())
		}
		f, err := parseIdle(out)
		if err != nil {
			tb.Fatalf("%s child: %v\n%s", client, err, out)
		}
		figs[client] = f
	}
	return figs
}

// parseIdle reads the child's IDLEMEM line.
func parseIdle(out []byte) (idleFigures, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "IDLEMEM ") {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(line)[1:] {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		n, _ := strconv.Atoi(kv["sessions"])
		num := func(k string) float64 {
			v, _ := strconv.ParseFloat(kv[k], 64)
			return v
		}
		if n <= 0 {
			break
		}
		per := func(k string) float64 { return (num(k+"_after") - num(k+"_before")) / float64(n) / 1024 }
		return idleFigures{
			client:   kv["client"],
			sessions: n,
			rss:      per("rss"),
			released: per("released"),
			heap:     per("heap"),
			stacks:   per("stacks"),
			routines: (num("goroutines_after") - num("goroutines_before")) / float64(n),
		}, nil
	}
	return idleFigures{}, fmt.Errorf("no IDLEMEM line in the output")
}

// idleChild is the child's side: open the sessions, let them idle, and
// print what the process's memory grew by.
func idleChild(t *testing.T, client string) {
	servers := strings.Split(os.Getenv(idleEnvServers), ",")
	n, err := strconv.Atoi(os.Getenv(idleEnvSessions))
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", idleEnvSessions, os.Getenv(idleEnvSessions))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	open := func() (func(), error) {
		switch client {
		case "zkclient":
			c, err := zkclient.Connect(ctx, servers, zkclient.WithSessionTimeout(30*time.Second))
			if err != nil {
				return nil, err
			}
			return func() { c.Close() }, nil
		case "go-zookeeper":
			c, _, err := zk.Connect(servers, 30*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
			if err != nil {
				return nil, err
			}
			for c.State() != zk.StateHasSession {
				if ctx.Err() != nil {
					c.Close()
					return nil, ctx.Err()
				}
				time.Sleep(time.Millisecond)
			}
			return c.Close, nil
		}
		return nil, fmt.Errorf("unknown client %q", client)
	}
	// One session first, so that what a first session sets up once (code
	// paths, the runtime's caches) is not counted.
	first, err := open()
	if err != nil {
		t.Fatal(err)
	}
	first()
	before := sample()

	closers := make([]func(), n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c, err := open()
				if err != nil {
					errs <- err
					return
				}
				closers[i] = c
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	// Idle: let every session settle (nothing is sent but pings, every
	// 10s at this timeout).
	time.Sleep(2 * time.Second)
	after := sample()
	fmt.Printf("IDLEMEM client=%s sessions=%d rss_before=%d rss_after=%d released_before=%d released_after=%d heap_before=%d heap_after=%d stacks_before=%d stacks_after=%d goroutines_before=%d goroutines_after=%d\n",
		client, n, before.rss, after.rss, before.released, after.released, before.heap, after.heap, before.stacks, after.stacks, before.goroutines, after.goroutines)

	next = make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				closers[i]()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// memSample is the process's memory at one moment, in bytes.
type memSample struct {
	rss, released, heap, stacks int64
	goroutines                  int
}

// sample collects garbage, waits a moment and reads the resident set size;
// then has the runtime return its free memory to the OS and reads it again.
func sample() memSample {
	var s memSample
	runtime.GC()
	time.Sleep(500 * time.Millisecond)
	s.rss = vmRSS()
	debug.FreeOSMemory()
	time.Sleep(200 * time.Millisecond)
	s.released = vmRSS()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.heap, s.stacks = int64(ms.HeapInuse), int64(ms.StackInuse)
	s.goroutines = runtime.NumGoroutine()
	return s
}

// vmRSS reads VmRSS from /proc/self/status, in bytes.
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return -1
}
