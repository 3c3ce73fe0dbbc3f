package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// nodePath is the path of client c's PersistentNode.
func (r *runner) nodePath(c int) string { return fmt.Sprintf("%s/%s/c%d", r.o.Base, ResNode, c) }

// nodeKeeper keeps an ephemeral PersistentNode at client c's path, made on
// the client's session, WithSessionRenewal making sessions of its own
// through the same proxies when one expires. Until the heal, every 100 to
// 400 ms, it gives the node new data (each its own, "c<id>-d<n>") or, one
// time in three, deletes the node of the other client's keeper through
// the client's session; every change is recorded. A PersistentNode stops
// on its own only when the session it was made on is closed (the client
// retired it): it is made again on the next. After the heal the keeper
// records that it stopped changing the node, and keeps it until the run
// ends; then it closes it (which deletes the node).
func (r *runner) nodeKeeper(ctx context.Context, c, other *client, rng *rand.Rand) {
	defer r.workers.Done()
	quiet := sync.OnceFunc(r.nodesQuiet.Done)
	defer quiet()
	path, otherPath := r.nodePath(c.id), r.nodePath(other.id)
	n := 0
	next := func() string { n++; return fmt.Sprintf("c%d-d%d", c.id, n) }
	renew := func(ctx context.Context) (*zkrecipes.Session, error) {
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		s, err := zkrecipes.NewSession(nctx, c.servers, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(r.o.SessionTimeout)))
		if err != nil {
			r.fail(c.id, 0, ResNode, OpSessionNew, err)
			return nil, err
		}
		r.h.Record(Event{Kind: KindNodeSession, Client: c.id, Res: ResNode, Path: path, Session: s.ID(), Detail: "renewed"})
		return s, nil
	}
	for ctx.Err() == nil {
		ref, err := c.session(ctx)
		if err != nil {
			return
		}
		r.h.Record(Event{Kind: KindNodeSession, Client: c.id, Gen: ref.gen, Res: ResNode, Path: path, Session: ref.s.ID(), Detail: "the client's"})
		data := next()
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		node, err := zkrecipes.CreatePersistentNode(cctx, ref.s, path, []byte(data), zkclient.Ephemeral, zkrecipes.WithSessionRenewal(renew))
		cancel()
		r.h.Record(Event{Kind: KindNodeSet, Client: c.id, Gen: ref.gen, Res: ResNode, Op: OpNodeCreate, Path: path, Data: data, Accepted: err == nil})
		if err != nil {
			r.fail(c.id, ref.gen, ResNode, OpNodeCreate, err)
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		stopped := r.keep(ctx, c, ref, node, path, otherPath, rng, next)
		if !stopped && ctx.Err() == nil {
			r.h.Record(Event{Kind: KindQuiet, Client: c.id, Res: ResNode, Path: path})
			quiet()
			<-ctx.Done()
		}
		cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), r.o.SessionTimeout+5*time.Second)
		if err := node.Close(cctx); err != nil {
			r.fail(c.id, ref.gen, ResNode, OpNodeClose, err)
		}
		cancel()
	}
}

// keep changes the node until the heal (it returns false then, or when
// ctx ends) or until the node stops (true: make it again).
func (r *runner) keep(ctx context.Context, c *client, ref *sessionRef, node *zkrecipes.PersistentNode, path, otherPath string, rng *rand.Rand, next func() string) bool {
	stop := func() bool {
		// Only the closing of the session it was made on (by the
		// client's retire) may stop it: its renewal covers expiries.
		err := node.Err()
		if errors.Is(err, zkrecipes.ErrSessionClosed) {
			// The close may still be under way: the node sees the
			// session closing before Done closes.
			t := time.NewTimer(r.o.SessionTimeout)
			select {
			case <-ref.s.Done():
			case <-t.C:
			}
			t.Stop()
		}
		if !errors.Is(err, zkrecipes.ErrSessionClosed) || !over(ref.s) {
			r.h.Record(Event{Kind: KindError, Client: c.id, Gen: ref.gen, Res: ResNode, Op: OpNodeRun, ErrKind: Classify(err), Detail: fmt.Sprint(err)})
		}
		return true
	}
	for !isClosed(r.healed) {
		t := time.NewTimer(time.Duration(100+rng.IntN(301)) * time.Millisecond)
		select {
		case <-node.Done():
			t.Stop()
			return stop()
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if rng.IntN(3) == 0 {
			r.deleteNode(wctx, c, otherPath)
		} else {
			data := next()
			err := node.SetData(wctx, []byte(data))
			if errors.Is(err, zkrecipes.ErrNotHeld) && isClosed(node.Done()) {
				cancel()
				return stop() // as documented, once the node is no longer kept
			}
			r.h.Record(Event{Kind: KindNodeSet, Client: c.id, Gen: ref.gen, Res: ResNode, Op: OpNodeSetData, Path: path, Data: data, Accepted: err == nil})
			if err != nil {
				r.fail(c.id, ref.gen, ResNode, OpNodeSetData, err)
			}
		}
		cancel()
	}
	return false
}

// deleteNode deletes another keeper's node through client c's session.
func (r *runner) deleteNode(ctx context.Context, c *client, p string) {
	ref := c.peek()
	if ref == nil || over(ref.s) {
		return
	}
	err := ref.s.Client().Delete(ctx, p, -1)
	if err != nil && !errors.Is(err, zkclient.ErrNoNode) {
		r.fail(c.id, ref.gen, ResNode, OpNodeDelete, err)
		return
	}
	r.h.Record(Event{Kind: KindNodeDelete, Client: c.id, Gen: ref.gen, Res: ResNode, Path: p, Accepted: err == nil})
}

// checkNodes waits, after the heal, for the keepers to stop changing their
// nodes, then reads each node from the server until it is as NodeVerdict
// wants it, or ProgressBound has passed since the heal, and records what
// it read last.
func (r *runner) checkNodes(ctx context.Context, clients []int) {
	deadline := time.Now().Add(r.o.ProgressBound)
	if !waitQuiet(ctx, &r.nodesQuiet, deadline) {
		return
	}
	for _, c := range clients {
		path := r.nodePath(c)
		for {
			seen := Event{Kind: KindNodeSeen, Client: c, Res: ResNode, Path: path}
			admin, err := r.adminClient(ctx)
			if err == nil {
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if err = admin.Sync(rctx, path); err == nil || errors.Is(err, zkclient.ErrNoNode) {
					var data []byte
					var st zkclient.Stat
					data, st, err = admin.Get(rctx, path)
					seen.Accepted, seen.Data, seen.Session = err == nil, string(data), st.EphemeralOwner
				}
				cancel()
			}
			if err != nil {
				seen.Detail = err.Error()
			}
			if NodeVerdict(r.h.Events(), path, seen) == "" || !time.Now().Before(deadline) || ctx.Err() != nil {
				r.h.Record(seen)
				break
			}
			sleep(ctx, 100*time.Millisecond)
		}
	}
}
