package zkrecipes

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// latchKind is Curator LeaderLatch's node name: "_c_<uuid>-latch-<seq>",
// whose data is the participant's id.
var (
	latchKind  = kind{marker: "latch-"}
	latchKinds = []kind{latchKind}
)

// Election is one participant in a leader election on a ZooKeeper path,
// compatible with Apache Curator's LeaderLatch: each candidate queues an
// ephemeral sequential node "_c_<uuid>-latch-<seq>" holding its id, the
// lowest node leads, and every other candidate watches only the node just
// before its own. Go and Java participants can share one election.
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
}

// NewElection returns the participant id in the election on path for the
// session s. Participants' ids need not be unique, but an empty id is
// refused (Leader and Observe use "" for "no leader"). A bad path or id is
// reported, without any network call, by the first call.
func NewElection(s *Session, path, id string) *Election {
	e := &Election{id: id}
	e.st.init(s, path, latchKinds, []LockOption{WithNodeData([]byte(id))})
	if e.st.err == nil && id == "" {
		e.st.err = fmt.Errorf("%w: election %s: empty participant id", ErrInvalidArgument, path)
	}
	return e
}

// ID returns the participant's id.
func (e *Election) ID() string { return e.id }

// Campaign enters the election and waits until this participant leads, ctx
// ends, or the session is over. When it returns an error the participant has
// left the election: its node is deleted even if ctx was cancelled. Calling
// Campaign while campaigning or leading returns ErrBusy.
func (e *Election) Campaign(ctx context.Context) error {
	return e.st.acquire(ctx, latchKind, false, "campaign")
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

// Leader returns the id of the current leader (the data of the lowest node,
// whichever client made it), or an error wrapping ErrNoLeader when nobody
// campaigns. It does not need this participant to campaign.
func (e *Election) Leader(ctx context.Context) (string, error) {
	if e.st.err != nil {
		return "", e.st.err
	}
	for {
		cs, err := e.st.q.contenders(ctx)
		if errors.Is(err, zkclient.ErrNoNode) || err == nil && len(cs) == 0 {
			return "", fmt.Errorf("zkrecipes: leader of %s: %w", e.st.q.dir, ErrNoLeader)
		}
		if err != nil {
			return "", fmt.Errorf("zkrecipes: leader of %s: %w", e.st.q.dir, err)
		}
		data, _, err := e.st.q.s.getData(ctx, e.st.q.dir+"/"+cs[0].name)
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // the leader left between listing and reading: look again
		}
		if err != nil {
			return "", fmt.Errorf("zkrecipes: leader of %s: %w", e.st.q.dir, err)
		}
		return string(data), nil
	}
}

// Observe returns a channel that receives the id of the leader at once and
// again whenever leadership changes hands, "" meaning that nobody
// campaigns. A participant that resigns and is elected again is a new
// leadership, reported again with the same id. A slow receiver misses
// intermediate leaders but always gets the latest. It costs one watch event
// per change. The channel is closed when ctx
// ends or the session is over; cancel ctx to stop observing. It does not
// need this participant to campaign.
func (e *Election) Observe(ctx context.Context) <-chan string {
	out := make(chan string)
	if e.st.err != nil {
		close(out)
		return out
	}
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- string) {
	defer close(out)
	s := e.st.q.s
	last, sent := "", false // the leader's node name: a new node is a new leadership
	for {
		node, leader, wake, err := e.leaderW(ctx)
		if err != nil {
			if s.Err() == nil && ctx.Err() == nil {
				s.log.Warn("zkrecipes: election observer stopped", "path", e.st.q.dir, "err", err)
			}
			return
		}
		if !sent || node != last {
			select {
			case out <- leader:
				last, sent = node, true
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		case <-s.Done():
			return
		}
	}
}

// leaderW returns the leader's node name and id ("" when nobody campaigns)
// and a watch that fires when that may change: on the leader's node, or,
// without a leader, on the election's children or on the path's creation.
func (e *Election) leaderW(ctx context.Context) (node, id string, wake <-chan zkclient.Event, err error) {
	s, dir := e.st.q.s, e.st.q.dir
	for {
		cs, err := e.st.q.contenders(ctx)
		if errors.Is(err, zkclient.ErrNoNode) {
			ok, w, err := s.existsW(ctx, dir)
			if err != nil {
				return "", "", nil, err
			}
			if !ok {
				return "", "", w.event(), nil
			}
			w.stop()
			continue
		}
		if err != nil {
			return "", "", nil, err
		}
		if len(cs) == 0 {
			kids, w, err := s.childrenW(ctx, dir)
			if errors.Is(err, zkclient.ErrNoNode) {
				continue
			}
			if err != nil {
				return "", "", nil, err
			}
			if cs, err = e.st.q.sorted(kids); err != nil || len(cs) == 0 {
				return "", "", w.event(), err
			}
			// Somebody arrived since the first listing; that child
			// watch fires at the next change and wakes us needlessly
			// once at most.
		}
		data, w, err := s.getDataW(ctx, dir+"/"+cs[0].name)
		if errors.Is(err, zkclient.ErrNoNode) {
			continue
		}
		if err != nil {
			return "", "", nil, err
		}
		return cs[0].name, string(data), w.event(), nil
	}
}
