package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// ReadClients names the clients RunReads knows (internal/gozk runs
// go-zookeeper/zk's through RunReadsWith).
var ReadClients = []string{"zkclient"}

// ReadsConfig describes one run of RunReads.
type ReadsConfig struct {
	Servers    []string
	Path       string // the node read; created (with Size bytes) if missing
	Goroutines int    // readers sharing the one session
	Reads      int    // total reads
	Size       int    // the node's data size
}

// ReadsResult is what one run of RunReads measured.
type ReadsResult struct {
	Client    string        `json:"client"`
	Reads     int           `json:"reads"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	PerSecond float64       `json:"reads_per_second"`
}

// MergeReads adds up runs of one client measured apart.
func MergeReads(runs ...ReadsResult) ReadsResult {
	var m ReadsResult
	for _, r := range runs {
		m.Client = r.Client
		m.Reads += r.Reads
		m.Elapsed += r.Elapsed
	}
	if m.Elapsed > 0 {
		m.PerSecond = float64(m.Reads) / m.Elapsed.Seconds()
	}
	return m
}

// RunReads opens one session with the named client and has cfg.Goroutines
// goroutines share it, each reading cfg.Path (getData, no watch) over and
// over until cfg.Reads reads are done. Only the reads are timed: the
// session and the node are set up first. Every read's data is checked.
func RunReads(ctx context.Context, client string, cfg ReadsConfig) (ReadsResult, error) {
	if client != "zkclient" {
		return ReadsResult{}, fmt.Errorf("bench: reads: unknown client %q (want one of %v)", client, ReadClients)
	}
	return RunReadsWith(ctx, client, cfg, openZkcReads)
}

// openZkcReads is RunReads's zkclient session.
func openZkcReads(ctx context.Context, cfg ReadsConfig, data []byte) (func(context.Context) ([]byte, error), func(), error) {
	c, err := zkclient.Connect(ctx, cfg.Servers, zkclient.WithSessionTimeout(30*time.Second))
	if err != nil {
		return nil, nil, err
	}
	if dir := Parent(cfg.Path); dir != "/" {
		if err := (zkcFloor{c}).ensure(ctx, dir); err != nil {
			c.Close()
			return nil, nil, err
		}
	}
	if _, err := c.Create(ctx, cfg.Path, data, zkclient.Persistent, zkcACL); err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
		c.Close()
		return nil, nil, err
	}
	get := func(ctx context.Context) ([]byte, error) {
		b, _, err := c.Get(ctx, cfg.Path)
		return b, err
	}
	return get, func() { c.Close() }, nil
}

// RunReadsWith runs RunReads's measure, under the name client, on the
// session open opens: open creates cfg.Path with data if it is missing and
// returns the read to time and the session's close.
func RunReadsWith(ctx context.Context, client string, cfg ReadsConfig, open func(ctx context.Context, cfg ReadsConfig, data []byte) (get func(context.Context) ([]byte, error), close func(), err error)) (ReadsResult, error) {
	if cfg.Goroutines < 1 || cfg.Reads < 1 {
		return ReadsResult{}, fmt.Errorf("bench: reads: need at least one goroutine and one read (got %d, %d)", cfg.Goroutines, cfg.Reads)
	}
	data := bytes.Repeat([]byte{'x'}, cfg.Size)
	get, closeSession, err := open(ctx, cfg, data)
	if err != nil {
		return ReadsResult{}, fmt.Errorf("bench: reads: %s: %w", client, err)
	}
	defer closeSession()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		budget   atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		begin    = make(chan struct{})
	)
	budget.Store(int64(cfg.Reads))
	for range cfg.Goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			for budget.Add(-1) >= 0 {
				b, err := get(ctx)
				if err == nil && !bytes.Equal(b, data) {
					err = fmt.Errorf("read %d bytes, want %d", len(b), len(data))
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("bench: reads: %s: %w", client, err)
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		}()
	}
	start := time.Now()
	close(begin)
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return ReadsResult{}, firstErr
	}
	return ReadsResult{
		Client:    client,
		Reads:     cfg.Reads,
		Elapsed:   elapsed,
		PerSecond: float64(cfg.Reads) / elapsed.Seconds(),
	}, nil
}

// Parent is the parent of path p ("/" for a child of the root).
func Parent(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}
