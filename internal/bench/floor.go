package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// runFloor measures the least a handoff can cost on this server: sessions
// whose nodes are queued in advance (untimed) each wait for their
// predecessor's deletion event and then delete their own node. A handoff is
// then one delete and one event, with no reads. With one contender it
// measures one create and one delete, the least an uncontended lock and
// unlock can cost.
func runFloor(ctx context.Context, cfg Config) (Result, error) {
	clients := make([]*raw, 0, cfg.Contenders)
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	for range cfg.Contenders {
		c, err := dialRaw(ctx, cfg)
		if err != nil {
			return Result{}, err
		}
		clients = append(clients, c)
	}
	if err := clients[0].ensure(cfg.Path); err != nil {
		return Result{}, fmt.Errorf("bench: floor: %w", err)
	}
	acl := zk.WorldACL(zk.PermAll)
	var elapsed time.Duration
	done := 0
	if cfg.Contenders == 1 {
		c := clients[0]
		start := time.Now()
		for done < cfg.Acquisitions {
			p, err := c.conn.Create(cfg.Path+"/lock-", nil, zk.FlagEphemeralSequential, acl)
			if err != nil {
				return Result{}, fmt.Errorf("bench: floor: %w", err)
			}
			if err := c.conn.Delete(p, -1); err != nil {
				return Result{}, fmt.Errorf("bench: floor: %w", err)
			}
			done++
			if cfg.Progress != nil {
				cfg.Progress(done)
			}
		}
		elapsed = time.Since(start)
	}
	for done < cfg.Acquisitions {
		n := min(cfg.Contenders, cfg.Acquisitions-done+1)
		nodes := make([]string, n)
		for i := range n {
			p, err := clients[i].conn.Create(cfg.Path+"/lock-", nil, zk.FlagEphemeralSequential, acl)
			if err != nil {
				return Result{}, fmt.Errorf("bench: floor: %w", err)
			}
			nodes[i] = p
		}
		watches := make([]<-chan zk.Event, n)
		for i := 1; i < n; i++ {
			_, _, ch, err := clients[i].conn.GetW(nodes[i-1])
			if err != nil {
				return Result{}, fmt.Errorf("bench: floor: %w", err)
			}
			watches[i] = ch
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		start := time.Now()
		for i := 1; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-watches[i]:
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
				if err := clients[i].conn.Delete(nodes[i], -1); err != nil {
					errs <- err
				}
			}()
		}
		if err := clients[0].conn.Delete(nodes[0], -1); err != nil {
			return Result{}, fmt.Errorf("bench: floor: %w", err)
		}
		wg.Wait()
		elapsed += time.Since(start)
		close(errs)
		if err := <-errs; err != nil {
			return Result{}, fmt.Errorf("bench: floor: %w", err)
		}
		done += n - 1
		if cfg.Progress != nil {
			cfg.Progress(done)
		}
	}
	events := 1.0
	if cfg.Contenders == 1 {
		events = 0
	}
	return Result{
		Recipe:           "floor",
		Chain:            cfg.Contenders > 1,
		Contenders:       cfg.Contenders,
		Acquisitions:     done,
		Elapsed:          elapsed,
		PerSecond:        float64(done) / elapsed.Seconds(),
		Handoff:          elapsed / time.Duration(done),
		Listings:         0,
		Reads:            0,
		Events:           events,
		EventsPerRelease: events,
	}, nil
}
