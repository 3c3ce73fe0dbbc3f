package zktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// RunShared runs a test binary's tests against one ZooKeeper started for
// all of them, and is meant to be all of a TestMain:
//
//	func TestMain(m *testing.M) {
//		os.Exit(zktest.RunShared(m, zktest.Options{}, func(c *zktest.Cluster, err error) {
//			shared, sharedErr = c, err
//		}))
//	}
//
// It starts a cluster with opts (within [Bound](90s)) and hands it, or the
// error that kept it from starting, to started before the tests run (tests
// then call [SkipOrFail] with the error). When every test passed it also
// fails the run if a session is still open on the server after
// [Bound](15s) — a session some test did not close, the wait covering the
// timeout of one whose client could not (a killed process, a cut link) —
// or if goroutines are left running ([FindLeaks]). It returns the exit
// code for os.Exit, after closing the cluster.
func RunShared(m *testing.M, opts Options, started func(*Cluster, error)) int {
	ctx, cancel := context.WithTimeout(context.Background(), Bound(90*time.Second))
	c, err := Start(ctx, opts)
	cancel()
	started(c, err)
	code := m.Run()
	if c != nil {
		if code == 0 {
			if err := NoSessions(c.Addr(0), 15*time.Second); err != nil {
				fmt.Fprintln(os.Stderr, "zktest:", err)
				code = 1
			}
		}
		c.Close()
	}
	if code == 0 {
		if err := FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// DeleteTree deletes p and every node under it, children first. Nodes
// already gone (p included) are not an error: a test's cleanup may run
// after its ephemeral nodes went with their session.
func DeleteTree(ctx context.Context, c *zkclient.Client, p string) error {
	kids, _, err := c.Children(ctx, p)
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("zktest: delete the tree at %s: %w", p, err)
	}
	for _, k := range kids {
		child := p + "/" + k
		if p == "/" {
			child = "/" + k
		}
		if err := DeleteTree(ctx, c, child); err != nil {
			return err
		}
	}
	if err := c.Delete(ctx, p, -1); err != nil && !errors.Is(err, zkclient.ErrNoNode) {
		return fmt.Errorf("zktest: delete %s: %w", p, err)
	}
	return nil
}
