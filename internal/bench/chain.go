package bench

import (
	"context"
	"fmt"
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
	for done < cfg.Acquisitions {
		n := min(cfg.Contenders, cfg.Acquisitions-done+1)
		d, err := chainRound(ctx, cfg, clients[:n])
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
	return Result{
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
	}, nil
}

// chainRound queues every client behind the first, waits until all of them
// watch, then times the handoffs down the chain.
func chainRound(ctx context.Context, cfg Config, clients []client) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base, werr := watches(ctx, cfg.Servers)
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
	// All waiters watch once the server holds one more watch per waiter;
	// without the four-letter word, give them a moment.
	for werr == nil {
		n, err := watches(ctx, cfg.Servers)
		if err != nil || n >= base+len(clients)-1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if werr != nil {
		time.Sleep(500 * time.Millisecond)
	}
	start := time.Now()
	if err := clients[0].unlock(ctx); err != nil {
		cancel()
		wg.Wait()
		return 0, err
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return elapsed, nil
}

// watches is the number of watches all the servers hold, if they answer
// the four-letter word "wchs".
func watches(ctx context.Context, servers []string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	total := 0
	for _, addr := range servers {
		w, err := zkadmin.Wchs(ctx, addr)
		if err != nil {
			return 0, err
		}
		total += w.Watches
	}
	return total, nil
}
