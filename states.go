package zkrecipes

import (
	"context"
	"fmt"
	"slices"

	"github.com/zkrecipes/zkrecipes/internal/stream"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// SessionState is what a Session's user should believe about its
// connection and its holdings, in the manner of Curator's ConnectionState.
type SessionState int

// Session states, in the order a session can go through them. Suspended,
// Lost and Reconnected may repeat; Expired, AuthFailed and Closed are final.
const (
	// SessionConnected: the session was established (reported by the
	// first reconnection-free connect only; a Session returned by
	// NewSession is connected).
	SessionConnected SessionState = iota + 1
	// SessionSuspended: the connection is down. The session may live on
	// the server, and so may every holding; code acting under a holding
	// should pause until Reconnected (or Lost) says which.
	SessionSuspended
	// SessionLost: every holding of the session is void and each recipe's
	// Lost channel is closed, either because the session is ending
	// (Expired or Closed follow), or, in strict mode, because no answer
	// came within the margin, so the server may be about to expire the
	// session. The session itself may still live and reconnect; holdings
	// taken from then on are new ones.
	SessionLost
	// SessionReconnected: connected again, on the same session. Holdings
	// not reported Lost are intact.
	SessionReconnected
	// SessionExpired: the server expired the session; final.
	SessionExpired
	// SessionAuthFailed: the server refused the credentials; final.
	SessionAuthFailed
	// SessionClosed: Close was called; final.
	SessionClosed
)

func (st SessionState) String() string {
	switch st {
	case SessionConnected:
		return "connected"
	case SessionSuspended:
		return "suspended"
	case SessionLost:
		return "lost"
	case SessionReconnected:
		return "reconnected"
	case SessionExpired:
		return "expired"
	case SessionAuthFailed:
		return "auth-failed"
	case SessionClosed:
		return "closed"
	}
	return fmt.Sprintf("SessionState(%d)", int(st))
}

// Final reports whether no state follows st.
func (st SessionState) Final() bool { return st >= SessionExpired }

// SessionEvent is one change of a Session's state.
type SessionEvent struct {
	State  SessionState
	Server string // the server connected to, for Connected and Reconnected
	Err    error  // why, for Suspended and the final states
}

// SessionStates is a Session's state changes, read with Next. Unlike a
// [Stream], which merges the changes a slow reader has not seen yet, it
// keeps every change until it is read.
type SessionStates struct {
	q *stream.Queue[SessionEvent]
	s *Session
}

// States returns a stream of the session's state changes from now on, in
// order, none dropped however slowly it is read: Suspended, Lost,
// Reconnected and a final state. It ends, with the session's error, after
// the final state. Call Close when no longer reading. It costs a queue of
// the unread events; the Session's work never waits for a reader.
func (s *Session) States() *SessionStates {
	q := stream.New[SessionEvent]()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.final != nil {
		q.Push(*s.final)
		q.Close(s.final.Err)
	} else {
		s.subs = append(s.subs, q)
	}
	return &SessionStates{q: q, s: s}
}

// Next returns the next state change, waiting while ctx allows. After the
// final state it returns the session's error (wrapping [ErrSessionExpired]
// or [ErrSessionClosed], say), and after Close, once the changes queued
// before are read, [ErrStreamClosed].
func (st *SessionStates) Next(ctx context.Context) (SessionEvent, error) { return st.q.Next(ctx) }

// Ready returns a channel closed when Next has something to return at once.
func (st *SessionStates) Ready() <-chan struct{} { return st.q.Ready() }

// Close ends the stream; Next then returns [ErrStreamClosed] once drained
// (or the session's error, if the final state came first). Calling it
// again does nothing.
func (st *SessionStates) Close() {
	s := st.s
	s.mu.Lock()
	s.subs = slices.DeleteFunc(s.subs, func(q *stream.Queue[SessionEvent]) bool { return q == st.q })
	s.mu.Unlock()
	st.q.Close(ErrStreamClosed)
}

// tellLocked sends ev to every subscriber, and ends the streams after a
// final state.
func (s *Session) tellLocked(ev SessionEvent) {
	for _, q := range s.subs {
		q.Push(ev)
		if ev.State.Final() {
			q.Close(ev.Err)
		}
	}
	if ev.State.Final() {
		s.subs = nil
	}
}

// sessionState maps the client's state to the Session's.
func sessionState(st zkclient.State) SessionState {
	switch st {
	case zkclient.StateConnected:
		return SessionConnected
	case zkclient.StateSuspended:
		return SessionSuspended
	case zkclient.StateReconnected:
		return SessionReconnected
	case zkclient.StateExpired:
		return SessionExpired
	case zkclient.StateAuthFailed:
		return SessionAuthFailed
	}
	return SessionClosed
}
