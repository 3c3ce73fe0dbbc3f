package zkrecipes

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Election is one participant in a leader election on a ZooKeeper path,
// compatible with Apache Curator's LeaderLatch: each candidate queues an
// ephemeral sequential node "_c_<uuid>-latch-<seq>" holding its value, the
// lowest node leads, and every other candidate watches only the node just
// before its own. Go and Java participants can share one election.
//
// The value is what a participant advertises, as with etcd's election: its
// id unless it campaigns with another value (CampaignValue), and a leader
// may change it while leading (Proclaim). Leader and Observe report the
// leader's value. Curator's participants read it as the participant id
// (LeaderLatch keeps the id in the node's data, as Campaign does).
//
// A participant leads from the return of Campaign until it resigns or Lost
// is closed. When a leader resigns, crashes or its session expires, exactly
// one candidate (the next in line) is woken, and it leads only after
// checking that its node belongs to its current session.
//
// An Election value is one participant: it campaigns at most once at a
// time. Its methods are safe to call concurrently.
type Election struct {
	st seat
	id string
	// claiming is set, under st.mu, while CampaignValue hands its value
	// to the seat, so that a concurrent campaign cannot replace it.
	claiming bool
}

// NewElection returns the participant id in the election on path for the
// session s. Participants' ids need not be unique, but an empty id is
// refused (Leader and Observe use "" for "no leader"). A leader that
// resigns hands the leadership by grant to the next candidate if that one
// takes grants, which then leads without reading the line; the options
// that apply are WithGrants and WithoutGrants. A bad path, id or option is
// reported, without any network call, by the first call.
func NewElection(s *Session, path, id string, opts ...LockOption) *Election {
	e := &Election{id: id}
	e.st.init(s, path, latchKinds, opts)
	switch {
	case e.st.err != nil:
	case id == "":
		e.st.err = fmt.Errorf("%w: election %s: empty participant id", ErrInvalidArgument, path)
	case e.st.data != nil:
		e.st.err = fmt.Errorf("%w: election %s: WithNodeData is not for an Election (its node holds the value it advertises: see CampaignValue)", ErrInvalidArgument, path)
	}
	e.st.data = []byte(id)
	return e
}

// ID returns the participant's id.
func (e *Election) ID() string { return e.id }

// Campaign enters the election, advertising the participant's id, and waits
// until this participant leads, ctx ends, or the session is over. When it
// returns an error the participant has left the election: its node is
// deleted even if ctx was cancelled. Calling Campaign while campaigning or
// leading returns ErrBusy.
func (e *Election) Campaign(ctx context.Context) error {
	return e.CampaignValue(ctx, e.id)
}

// CampaignValue is Campaign advertising val instead of the id (like etcd's
// Election.Campaign(ctx, val)): val is the data of the participant's node,
// which Leader and Observe report while it leads, and which Curator's
// participants read as its id. An empty val is refused (Leader and Observe
// use "" for "no leader"). It costs nothing more than Campaign.
func (e *Election) CampaignValue(ctx context.Context, val string) error {
	if e.st.err != nil {
		return e.st.err
	}
	if val == "" {
		return fmt.Errorf("%w: election %s: empty value", ErrInvalidArgument, e.st.q.dir)
	}
	e.st.mu.Lock()
	if e.st.busy || e.claiming {
		e.st.mu.Unlock()
		return errorf("campaign %s: %w", e.st.q.dir, ErrBusy)
	}
	e.claiming, e.st.data = true, []byte(val)
	e.st.mu.Unlock()
	err := e.st.acquire(ctx, latchKind, false, "campaign")
	e.st.mu.Lock()
	e.claiming = false
	e.st.mu.Unlock()
	return err
}

// Proclaim changes the value this participant advertises while it leads,
// without giving up leadership (like etcd's Election.Proclaim): one write
// to its node, whose watchers (observers, and the next candidate in line)
// each get one event. It returns an error wrapping ErrNotHeld if this
// participant does not lead or its Lost channel is closed (a leader that
// may have lost must not speak for the leadership), ErrNodeLost if its
// node is gone, and ErrSessionExpired or ErrSessionClosed if the session
// is over. An empty val is refused, as by CampaignValue. A Campaign that
// follows a Resign advertises its own value again, not the proclaimed one.
func (e *Election) Proclaim(ctx context.Context, val string) error {
	if e.st.err != nil {
		return e.st.err
	}
	dir := e.st.q.dir
	if val == "" {
		return fmt.Errorf("%w: election %s: empty value", ErrInvalidArgument, dir)
	}
	e.st.mu.Lock()
	t, h := e.st.held, e.st.hold
	e.st.mu.Unlock()
	s := e.st.q.s
	if t == nil {
		return errorf("proclaim in %s: %w: this participant does not lead", dir, ErrNotHeld)
	}
	select {
	case <-h.lost:
		if err := s.Err(); err != nil {
			return errorf("proclaim in %s: %w", dir, err)
		}
		return errorf("proclaim in %s: %w: the leadership is lost", dir, ErrNotHeld)
	default:
	}
	_, err := s.setData(ctx, t.path(), []byte(val), -1)
	if errors.Is(err, zkclient.ErrNoNode) {
		if err = s.Err(); err == nil {
			err = fmt.Errorf("%w: %s", ErrNodeLost, t.path())
		}
	}
	if err != nil {
		return errorf("proclaim in %s: %w", dir, err)
	}
	return nil
}

// Resign gives up leadership: Lost is closed first, then the participant's
// node is deleted (even if ctx is already cancelled), which wakes the next
// candidate. It returns an error wrapping ErrNotHeld if this participant
// does not lead (to stop a Campaign, cancel its context), and one wrapping
// ErrSessionExpired if the session expired meanwhile.
func (e *Election) Resign(ctx context.Context) error {
	return e.st.leave(ctx, false, "resign")
}

// Lost returns a channel that is closed when this participant's leadership
// is void: the session expired or was closed, its node was deleted by
// someone else, or (in strict mode, see WithStrict) the connection was down
// long enough that the session may have expired. A leader must stop acting
// as one when it closes, and Resign (or close the session) before
// campaigning again. When the participant does not lead it returns a closed
// channel.
func (e *Election) Lost() <-chan struct{} { return e.st.lostChan() }

// HeldOp returns a transaction operation that succeeds only while this
// value holds the leadership: it checks that the holder's node still exists, the
// equivalent of etcd's Mutex.IsOwner compare. A write made in the same
// Session.Multi is then applied only if the leadership is still held when the
// server applies it; otherwise the transaction fails (the check with
// zkclient.ErrNoNode) and nothing is written. When nothing is held, the
// transaction fails before it is sent, with an error wrapping ErrNotHeld.
// It costs no request of its own.
func (e *Election) HeldOp() zkclient.Op { return e.st.heldOp() }

// Token returns the fencing token of the current leadership, or 0 when the
// participant does not lead. It strictly increases from one leader of the
// path to the next (see Mutex.Token).
func (e *Election) Token() int64 { return e.st.token() }

// Leader returns the value the current leader advertises (the data of the
// lowest node, whichever client made it: its id, unless it campaigned with
// or proclaimed another value), or an error wrapping ErrNoLeader when
// nobody campaigns. It does not need this participant to campaign.
func (e *Election) Leader(ctx context.Context) (string, error) {
	if e.st.err != nil {
		return "", e.st.err
	}
	for {
		cs, err := e.st.q.contenders(ctx)
		if errors.Is(err, zkclient.ErrNoNode) || err == nil && len(cs) == 0 {
			return "", errorf("leader of %s: %w", e.st.q.dir, ErrNoLeader)
		}
		if err != nil {
			return "", errorf("leader of %s: %w", e.st.q.dir, err)
		}
		rd, err := e.st.q.s.read(ctx, e.st.q.dir+"/"+cs[0].name, reading{op: readData})
		data := rd.data
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // the leader left between listing and reading: look again
		}
		if err != nil {
			return "", errorf("leader of %s: %w", e.st.q.dir, err)
		}
		return string(data), nil
	}
}

// Observe follows the leader's value (see [Election.Leader]) as a
// [Stream], "" meaning that nobody campaigns: its first Next returns the
// leader when the watch was set, and each later one the leader after a
// change, leadership changing hands or the leader proclaiming a new value,
// merged with the changes made before Next was called. A participant that
// resigns and is elected again is a new leadership, reported again with
// the same value. It does not need this participant to campaign.
//
// Observe reads the leader before it returns (ctx bounds that read only);
// it returns an error for an invalid path or id, or when that read fails.
// The stream costs one watch, and one watch event per change.
func (e *Election) Observe(ctx context.Context) (*Stream[string], error) {
	what := "observe election " + e.st.q.dir
	if e.st.err != nil {
		return nil, errorf("%s: %w", what, e.st.err)
	}
	node, leader, w, err := e.leaderW(ctx)
	if err != nil {
		w.stop()
		return nil, errorf("%s: %w", what, err)
	}
	s := e.st.q.s
	st := newStream(leader, func(a, b string) bool { return a == b })
	st.run(s, what, func(ctx context.Context) error {
		var gen uint64 // a leadership is its node: gen counts them
		for {
			select {
			case <-w.event():
			case <-ctx.Done():
				w.stop()
				return ctx.Err()
			case <-s.Done():
				return s.Err()
			}
			n, leader, nw, err := e.leaderW(ctx)
			if err != nil {
				nw.stop()
				return err
			}
			if n != node {
				node, gen = n, gen+1
			}
			w = nw
			st.emit(leader, gen)
		}
	})
	return st, nil
}

// leaderW returns the leader's node name and value ("" when nobody campaigns)
// and a watch that fires when that may change: on the leader's node, or,
// without a leader, on the election's children or on the path's creation.
func (e *Election) leaderW(ctx context.Context) (node, id string, wake watched, err error) {
	s, dir := e.st.q.s, e.st.q.dir
	for {
		cs, err := e.st.q.contenders(ctx)
		if errors.Is(err, zkclient.ErrNoNode) {
			rd, err := s.read(ctx, dir, reading{op: readStat, watch: true})
			ok, w := rd.ok, rd.w
			if err != nil {
				return "", "", watched{}, err
			}
			if !ok {
				return "", "", w, nil
			}
			w.stop()
			continue
		}
		if err != nil {
			return "", "", watched{}, err
		}
		if len(cs) == 0 {
			rd, err := s.read(ctx, dir, reading{op: readChildren, watch: true})
			kids, w := rd.kids, rd.w
			if errors.Is(err, zkclient.ErrNoNode) {
				continue
			}
			if err != nil {
				return "", "", watched{}, err
			}
			if cs, err = e.st.q.sorted(kids); err != nil || len(cs) == 0 {
				return "", "", w, err
			}
			// Somebody arrived since the first listing; that child
			// watch fires at the next change and wakes us needlessly
			// once at most.
		}
		rd, err := s.read(ctx, dir+"/"+cs[0].name, reading{op: readData, watch: true})
		data, w := rd.data, rd.w
		if errors.Is(err, zkclient.ErrNoNode) {
			continue
		}
		if err != nil {
			return "", "", watched{}, err
		}
		return cs[0].name, string(data), w, nil
	}
}
