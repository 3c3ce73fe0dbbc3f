package zktest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Reconfig changes the membership of an ensemble started with
// Options.Reconfig through c (a session authenticated as SuperUser),
// from the configuration version from, and returns the new configuration
// once committed. It is zkclient's Reconfig (add, remove) made sure: when
// the connection drops before the answer, as it may when the change
// removes the leader or the member c is connected to, it asks
// [zkclient.Client.Reconfigured] whether the change applied, and sends it
// again if it did not. A configuration that moved on from from is taken
// as the change applied: the tests that use it make one change at a time.
func Reconfig(ctx context.Context, c *zkclient.Client, add []string, remove []int64, from int64) (zkclient.EnsembleConfig, error) {
	for {
		cfg, err := c.Reconfig(ctx, add, remove, from)
		if !errors.Is(err, zkclient.ErrConnectionLoss) {
			if err != nil {
				return cfg, fmt.Errorf("zktest: reconfig +%q -%v from version %x: %w", add, remove, from, err)
			}
			return cfg, nil
		}
		cfg, applied, err := c.Reconfigured(ctx, from)
		for errors.Is(err, zkclient.ErrConnectionLoss) {
			// Not known yet (the client is moving too): ask again;
			// ctx bounds the loop.
			select {
			case <-ctx.Done():
				return cfg, fmt.Errorf("zktest: reconfig +%q -%v from version %x: %w", add, remove, from, ctx.Err())
			case <-time.After(20 * time.Millisecond): // a poll's pace, not a wait for readiness
			}
			cfg, applied, err = c.Reconfigured(ctx, from)
		}
		if err != nil {
			return cfg, fmt.Errorf("zktest: reconfig +%q -%v from version %x: %w", add, remove, from, err)
		}
		if applied {
			return cfg, nil
		}
	}
}
