package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The hand-rolled recipes that zkr demo measures zkrecipes against. Each
// has the one flaw a seed document warns about and is otherwise careful, so
// that the demo measures that flaw and nothing else. They run on zkclient,
// as zkrecipes does. They exist only to be shown failing: never use them.

// racyLock is a lock whose waiters watch their predecessor, set with an
// exists that does not check its answer: when the predecessor went away
// between the listing and the watch, the exists leaves a watch for a
// creation that never comes, and the waiter waits forever. gap widens that
// window on purpose (a sleep between listing and watching).
type racyLock struct {
	c    *zkclient.Client
	dir  string
	gap  time.Duration
	node string
	// gone records that the predecessor was already gone when the watch
	// was set: the missed wake-up. The lock ignores it; the demo reports it.
	gone atomic.Bool
}

func (l *racyLock) lock(ctx context.Context) error {
	node, err := createSeq(ctx, l.c, l.dir, "lock-", nil)
	if err != nil {
		return err
	}
	l.node = node
	for {
		kids, _, err := l.c.Children(ctx, l.dir)
		if err != nil {
			return l.abandon(err)
		}
		pred, err := predecessor(kids, node)
		if err != nil {
			return l.abandon(err)
		}
		if pred == "" {
			return nil
		}
		if err := sleepCtx(ctx, l.gap); err != nil {
			return l.abandon(err)
		}
		_, ok, w, err := l.c.ExistsW(ctx, l.dir+"/"+pred)
		if err != nil {
			return l.abandon(err)
		}
		if !ok {
			l.gone.Store(true) // the flaw: wait for the watch anyway
		}
		select {
		case <-w.Event():
		case <-ctx.Done():
			return l.abandon(ctx.Err())
		}
	}
}

func (l *racyLock) abandon(err error) error {
	l.unlock()
	return err
}

func (l *racyLock) unlock() error { return deleteNode(l.c, l.dir, &l.node) }

// herdLock is a lock whose waiters all watch the lock's children: every
// change wakes every waiter, which lists the children again (the herd).
// It handles the race that racyLock does not (a listing also sets the
// watch), and has no fencing token.
type herdLock struct {
	c    *zkclient.Client
	dir  string
	node string
}

func (l *herdLock) lock(ctx context.Context) error {
	node, err := createSeq(ctx, l.c, l.dir, "lock-", nil)
	if err != nil {
		return err
	}
	l.node = node
	for {
		kids, _, w, err := l.c.ChildrenW(ctx, l.dir)
		if err != nil {
			l.unlock()
			return err
		}
		pred, err := predecessor(kids, node)
		if err != nil {
			l.unlock()
			return err
		}
		if pred == "" {
			return nil
		}
		select {
		case <-w.Event():
		case <-ctx.Done():
			l.unlock()
			return ctx.Err()
		}
	}
}

func (l *herdLock) unlock() error { return deleteNode(l.c, l.dir, &l.node) }

// herdElection is a leader election whose candidates all watch the leader
// (the lowest node) instead of the candidate just before them: a leader's
// end wakes every other candidate. It handles the race (a leader gone
// before the watch was set means listing again).
type herdElection struct {
	c    *zkclient.Client
	dir  string
	id   string
	node string
	// watching is the leader node this candidate waits on, once its watch
	// is set; the demo waits for every candidate to be watching before it
	// kills a leader.
	watching atomic.Value // string
	listings atomic.Int64
}

func (e *herdElection) campaign(ctx context.Context) error {
	node, err := createSeq(ctx, e.c, e.dir, "cand-", []byte(e.id))
	if err != nil {
		return err
	}
	e.node = node
	for {
		e.listings.Add(1)
		kids, _, err := e.c.Children(ctx, e.dir)
		if err != nil {
			return err
		}
		if _, err := predecessor(kids, node); err != nil {
			return err
		}
		sortSeq(kids)
		if kids[0] == node {
			e.watching.Store("")
			return nil
		}
		_, ok, w, err := e.c.ExistsW(ctx, e.dir+"/"+kids[0])
		if err != nil {
			return err
		}
		if !ok {
			continue // gone already: list again
		}
		e.watching.Store(kids[0])
		select {
		case <-w.Event():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watched returns the node the candidate is watching ("" if none).
func (e *herdElection) watched() string {
	s, _ := e.watching.Load().(string)
	return s
}

// createSeq creates an ephemeral sequential node dir/prefix<seq>, making
// dir (a container) if missing, and returns its name.
func createSeq(ctx context.Context, c *zkclient.Client, dir, prefix string, data []byte) (string, error) {
	for try := 0; ; try++ {
		p, err := c.Create(ctx, dir+"/"+prefix, data, zkclient.EphemeralSequential, zkclient.WorldACL(zkclient.PermAll))
		if errors.Is(err, zkclient.ErrNoNode) && try < 3 {
			if err := ensureDir(ctx, c, dir); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", err
		}
		return p.Path[len(dir)+1:], nil
	}
}

// ensureDir creates dir and its missing parents as containers.
func ensureDir(ctx context.Context, c *zkclient.Client, dir string) error {
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		_, err := c.Create(ctx, dir[:i], nil, zkclient.Container, zkclient.WorldACL(zkclient.PermAll))
		if err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// deleteNode deletes dir/*node if set, with a fresh context (the caller's
// may have ended), and forgets it.
func deleteNode(c *zkclient.Client, dir string, node *string) error {
	if *node == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.Delete(ctx, dir+"/"+*node, -1)
	*node = ""
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil
	}
	return err
}

// predecessor returns the node just before node in kids by sequence
// number, "" if node is the lowest.
func predecessor(kids []string, node string) (string, error) {
	sortSeq(kids)
	i := slices.Index(kids, node)
	switch {
	case i < 0:
		return "", fmt.Errorf("my node %s is gone", node)
	case i == 0:
		return "", nil
	}
	return kids[i-1], nil
}

// sortSeq sorts node names by their 10-digit sequence suffix.
func sortSeq(kids []string) {
	slices.SortFunc(kids, func(a, b string) int { return seqOf(a) - seqOf(b) })
}

func seqOf(name string) int {
	if len(name) < 10 {
		return -1
	}
	n, err := strconv.Atoi(name[len(name)-10:])
	if err != nil || strings.HasPrefix(name[len(name)-10:], "-") {
		return -1
	}
	return n
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
