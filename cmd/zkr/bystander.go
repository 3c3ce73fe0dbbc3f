package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// bystander is a client with nothing to do with the lock being measured:
// it reads and writes a node of its own in a loop, so its latencies show
// what the lock's traffic costs every other client of the server.
type bystander struct {
	c    *zkclient.Client
	path string
}

// bystanderPause is the bystander's pause between two requests: a light
// client, not a load of its own.
const bystanderPause = time.Millisecond

// bystanderStats are the bystander's latencies during one run.
type bystanderStats struct {
	Reads    int           `json:"reads"`
	Writes   int           `json:"writes"`
	Errors   int           `json:"errors"`
	ReadP50  time.Duration `json:"read_p50_ns"`
	ReadP99  time.Duration `json:"read_p99_ns"`
	WriteP50 time.Duration `json:"write_p50_ns"`
	WriteP99 time.Duration `json:"write_p99_ns"`
}

// newBystander opens the bystander's session and creates its node in dir
// (made as a container if missing); close removes both.
func newBystander(ctx context.Context, env *demoEnv, dir string) (*bystander, error) {
	c, err := env.client(ctx, nil, 30*time.Second)
	if err != nil {
		return nil, err
	}
	path := dir + "/bystander"
	b := &bystander{c: c, path: path}
	if err := ensureDir(ctx, c, dir); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := c.Create(ctx, path, []byte("0"), zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll)); err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
		c.Close()
		return nil, err
	}
	return b, nil
}

func (b *bystander) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.c.Delete(ctx, b.path, -1)
	b.c.Close()
}

// start starts reading and writing; stop ends it and returns the latencies.
func (b *bystander) start(ctx context.Context) (stop func() bystanderStats) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg            sync.WaitGroup
		reads, writes []time.Duration
		errs          int
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			t0 := time.Now()
			var err error
			if i%2 == 0 {
				_, _, err = b.c.Get(ctx, b.path)
			} else {
				_, err = b.c.Set(ctx, b.path, []byte{byte('0' + i%10)}, -1)
			}
			d := time.Since(t0)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				errs++
			case i%2 == 0:
				reads = append(reads, d)
			default:
				writes = append(writes, d)
			}
			sleepCtx(ctx, bystanderPause)
		}
	}()
	return func() bystanderStats {
		cancel()
		wg.Wait()
		return bystanderStats{
			Reads: len(reads), Writes: len(writes), Errors: errs,
			ReadP50: pct(reads, 0.50), ReadP99: pct(reads, 0.99),
			WriteP50: pct(writes, 0.50), WriteP99: pct(writes, 0.99),
		}
	}
}

// pct returns the p-th percentile of d (0 if empty).
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return d[int(p*float64(len(d)-1))]
}
