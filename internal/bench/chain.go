package bench

import (
	"context"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
)

// runChain measures a lock's handoff time on the floor's terms: contenders
// queue in advance (untimed), then the first releases and each one, as its
// Lock returns, unlocks at once. Nobody queues again inside the timed part,
// so a handoff is exactly what the floor's is — the release, the event, and
// whatever the lock reads before it reports the lock held — and the two
// figures compare directly.
func runChain(ctx context.Context, recipe string, c contender, cfg Config) (Result, error) {
	if cfg.Contenders < 2 {
		return Result{}, fmt.Errorf("bench: a chain needs at least two contenders (got %d)", cfg.Contenders)
	}
	f, err := openFleet(ctx, c, cfg)
	if err != nil {
		return Result{}, err
	}
	defer f.close()
	clients := f.clients
	var elapsed time.Duration
	done := 0
	m := newMeter(cfg)
	for done < cfg.Acquisitions {
		n := min(cfg.Contenders, cfg.Acquisitions-done+1)
		d, err := chainRound(ctx, cfg, m, clients[:n])
		if err != nil {
			return Result{}, fmt.Errorf("bench: %s chain: %w", recipe, err)
		}
		elapsed += d
		done += n - 1
		if cfg.Progress != nil {
			cfg.Progress(done)
		}
	}
	sum := f.counted()
	// Every acquisition after the first of a round is a handoff; the
	// counts include the untimed first one of each round.
	acq := float64(done)
	r := Result{
		Recipe:             recipe,
		Chain:              true,
		Contenders:         cfg.Contenders,
		Acquisitions:       done,
		Elapsed:            elapsed,
		PerSecond:          acq / elapsed.Seconds(),
		Handoff:            elapsed / time.Duration(done),
		Listings:           perOrUnknown(sum.listings, acq),
		Reads:              perOrUnknown(sum.reads, acq),
		Events:             perOrUnknown(sum.events, acq),
		EventsPerRelease:   perOrUnknown(sum.events, acq),
		ListingsPerRelease: perOrUnknown(sum.listings, acq),
	}
	r.ServerReads, r.ServerWrites = m.per(acq)
	return r, nil
}

// chainRound queues every client behind the first, waits until all of them
// watch their predecessors, then times the handoffs down the chain, with m
// counting the servers' requests over the same part.
func chainRound(ctx context.Context, cfg Config, m *meter, clients []client) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := clients[0].lock(ctx); err != nil {
		return 0, err
	}
	var (
		wg     sync.WaitGroup
		errs   = make(chan error, len(clients))
		queued = make(chan struct{}, len(clients))
	)
	for _, cl := range clients[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			queued <- struct{}{}
			if err := cl.lock(ctx); err != nil {
				errs <- err
				cancel()
				return
			}
			if err := cl.unlock(ctx); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	for range clients[1:] {
		<-queued
	}
	// All waiters watch once each watches a node in the lock's directory
	// (the one before its own); the holder may watch its own node too,
	// and does not count. Without the four-letter word, give them a
	// moment.
	holder := clients[0].sessionID()
	for deadline := time.Now().Add(cfg.Timeout); ; {
		n, err := watching(ctx, cfg.Servers, cfg.Path, holder)
		if err != nil {
			time.Sleep(500 * time.Millisecond)
			break
		}
		if n >= len(clients)-1 {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d waiters watch a node of %s after %v", n, len(clients)-1, cfg.Path, cfg.Timeout)
		}
		time.Sleep(time.Millisecond)
	}
	m.start(ctx)
	start := time.Now()
	if err := clients[0].unlock(ctx); err != nil {
		cancel()
		wg.Wait()
		return 0, err
	}
	wg.Wait()
	elapsed := time.Since(start)
	m.stop(ctx)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return elapsed, nil
}

// watching is the number of data watches (getData, exists) that sessions
// other than holder have on nodes directly in dir, on all the servers, if
// they all answer the four-letter word "wchp", which lists data watches by
// path (a session's persistent watch for grants is on another path).
func watching(ctx context.Context, servers []string, dir string, holder int64) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	n := 0
	for _, addr := range servers {
		m, err := zkadmin.Wchp(ctx, addr)
		if err != nil {
			return 0, err
		}
		for p, sessions := range m {
			if path.Dir(p) != dir {
				continue
			}
			for _, id := range sessions {
				if id != holder {
					n++
				}
			}
		}
	}
	return n, nil
}
