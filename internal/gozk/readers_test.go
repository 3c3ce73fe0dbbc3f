package gozk_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/bench"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
)

// BenchmarkReaders measures an RWMutex writer's release to readers that
// wait behind it, until every one of them holds: by grant (the writer's
// one multi creates a grant for each, and each holds on its event) against
// by listing (each hears of the writer's deletion and lists the line), in
// interleaved rounds, one handoff per round per way; on loopback and
// through the fault proxy with a delay each way, as BenchmarkGrant. Before each timed
// release a first writer lets go to the timed one, which lists the line
// with the readers in it (as a writer that waited does). It reports each
// way's median time per handoff, their ratio, and the server's own count
// of reads and writes per handoff (mntr).
//
//	go test -run '^$' -bench Readers -benchtime 200x .
func BenchmarkReaders(b *testing.B) {
	if sharedErr != nil {
		b.Skip(sharedErr)
	}
	for _, l := range links(b, 500*time.Microsecond) {
		for _, readers := range []int{1, 10, 50} {
			b.Run(fmt.Sprintf("%s/readers=%d", l.name, readers), func(b *testing.B) { benchReaders(b, l.servers, readers) })
		}
	}
}

// readersWay is one way of the benchmark: its path, writers and readers.
type readersWay struct {
	name            string
	path            string
	first, writer   *zkrecipes.RWMutex
	firstS, writerS *zkrecipes.Session
	readers         []*zkrecipes.RWMutex
	took            []time.Duration
	reads, writes   int64
}

// benchReaders runs BenchmarkReaders with n readers, their sessions
// connected to servers (the writers' too), the server's watch table and
// counters read directly.
func benchReaders(b *testing.B, servers []string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	direct := shared.Addrs()
	session := func() *zkrecipes.Session {
		s, err := zkrecipes.NewSession(ctx, servers)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	admin, err := zkclient.Connect(ctx, direct)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	var ways []*readersWay
	for _, w := range []struct {
		name string
		opt  zkrecipes.LockOption
	}{{"grant", zkrecipes.WithGrants()}, {"listing", zkrecipes.WithoutGrants()}} {
		way := &readersWay{name: w.name, path: fmt.Sprintf("/bench-readers-%d-%s-%d", n, w.name, time.Now().UnixNano())}
		way.firstS, way.writerS = session(), session()
		way.first = zkrecipes.NewRWMutex(way.firstS, way.path, w.opt)
		way.writer = zkrecipes.NewRWMutex(way.writerS, way.path, w.opt)
		for range n {
			way.readers = append(way.readers, zkrecipes.NewRWMutex(session(), way.path, w.opt))
		}
		ways = append(ways, way)
	}
	count := bench.ServerRequests(direct)
	// watchers waits until the node of session id under path is watched by
	// at least want watches (its holder's own among them).
	watchers := func(path string, id int64, want int) {
		deadline := time.Now().Add(time.Minute)
		for {
			kids, _, err := admin.Children(ctx, path)
			if err != nil {
				b.Fatal(err)
			}
			w, err := zkadmin.Wchp(ctx, direct[0])
			if err != nil {
				b.Fatal(err)
			}
			for _, k := range kids {
				if _, st, err := admin.Get(ctx, path+"/"+k); err == nil && st.EphemeralOwner == id && len(w[path+"/"+k]) >= want {
					return
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("the node of session 0x%x under %s never had %d watchers", id, path, want)
			}
			time.Sleep(time.Millisecond) // polling the server's watch table
		}
	}
	round := func(w *readersWay, timed bool) {
		if err := w.first.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		writer := make(chan error, 1)
		go func() { writer <- w.writer.Lock(ctx) }()
		watchers(w.path, w.firstS.ID(), 2)
		got := make(chan error, n)
		for _, r := range w.readers {
			go func() { got <- r.RLock(ctx) }()
		}
		watchers(w.path, w.writerS.ID(), n)
		if err := w.first.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := <-writer; err != nil {
			b.Fatal(err)
		}
		before, err := count(ctx)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := w.writer.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		for range n {
			if err := <-got; err != nil {
				b.Fatal(err)
			}
		}
		took := time.Since(start)
		after, err := count(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if timed {
			w.took = append(w.took, took)
			w.reads += after.Reads - before.Reads
			w.writes += after.Writes - before.Writes
		}
		var wg sync.WaitGroup
		for _, r := range w.readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := r.RUnlock(ctx); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	for _, w := range ways { // untimed: the grant routes, the paths
		round(w, false)
	}
	b.ResetTimer()
	for i := range b.N {
		for j := range ways {
			round(ways[(i+j)%len(ways)], true)
		}
	}
	b.StopTimer()
	median := func(w *readersWay) time.Duration {
		d := slices.Clone(w.took)
		slices.Sort(d)
		return d[len(d)/2]
	}
	for _, w := range ways {
		b.ReportMetric(float64(median(w).Microseconds()), w.name+"-us/handoff")
		b.ReportMetric(float64(w.reads)/float64(b.N), w.name+"-srv-reads/handoff")
		b.ReportMetric(float64(w.writes)/float64(b.N), w.name+"-srv-writes/handoff")
	}
	b.ReportMetric(float64(median(ways[1]))/float64(median(ways[0])), "listing/grant")
}
