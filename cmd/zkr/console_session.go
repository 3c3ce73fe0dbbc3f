package main

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/zkrecipes/zkrecipes"
)

// This file is the console's ZooKeeper session: the current one, its
// connection's state as the page is told of it, and its renewal after it
// expires.

// The states of the console's link to ZooKeeper, as the page is told of
// them.
const (
	connConnected    = "connected"    // the session is connected
	connDisconnected = "disconnected" // the connection is down; the session may live on
	connExpired      = "expired"      // the session is over; a new one is being made
)

// connState is the console's link to ZooKeeper, as the page is told of it
// (the "conn" event, /api/info).
type connState struct {
	State    string `json:"state"`           // connected, disconnected, expired
	Session  string `json:"session"`         // the current session, 0x…
	Error    string `json:"error,omitempty"` // why it is not connected
	Renewals int    `json:"renewals"`        // sessions made after the first
}

// session returns the console's current session: one that may be
// disconnected, or over until the next is made.
func (c *console) session() *zkrecipes.Session {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.s
}

// conn returns the link's state and a channel closed at its next change
// (of state or of session).
func (c *console) conn() (connState, <-chan struct{}) {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.cs, c.csChanged
}

// setConn changes the link's state and tells whoever waits on conn.
func (c *console) setConn(f func(*connState)) {
	c.smu.Lock()
	defer c.smu.Unlock()
	old := c.cs
	f(&c.cs)
	if c.cs != old {
		close(c.csChanged)
		c.csChanged = make(chan struct{})
	}
}

// nextSession returns the console's session once it is another than old,
// or ctx's error.
func (c *console) nextSession(ctx context.Context, old *zkrecipes.Session) (*zkrecipes.Session, error) {
	for {
		c.smu.Lock()
		s, ch := c.s, c.csChanged
		c.smu.Unlock()
		if s != old {
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// over tells whether s has ended (expired or closed).
func over(s *zkrecipes.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

// keep follows the session's states until it is over, then makes the next
// one with opts.NewSession (again, with a growing pause, while that fails),
// until the console closes. Without NewSession, the console stays on its
// expired session (every read then fails).
func (c *console) keep() {
	defer c.wg.Done()
	s := c.session()
	for {
		c.follow(s)
		if c.ctx.Err() != nil || c.opts.NewSession == nil {
			return
		}
		next, err := c.renew()
		if err != nil {
			return // closing
		}
		c.smu.Lock()
		old, owned := c.s, c.owned
		c.s, c.owned = next, true
		c.smu.Unlock()
		if owned {
			old.Close()
		}
		c.setConn(func(cs *connState) {
			*cs = connState{State: connConnected, Session: sessionIDHex(next.ID()), Renewals: cs.Renewals + 1}
		})
		s = next
	}
}

// follow tells the page the states of s until s is over or the console
// closes.
func (c *console) follow(s *zkrecipes.Session) {
	states := s.States()
	defer states.Close()
	id := sessionIDHex(s.ID())
	if !s.Connected() && !over(s) {
		c.setConn(func(cs *connState) { cs.State, cs.Session = connDisconnected, id })
	}
	for {
		ev, err := states.Next(c.ctx)
		if err != nil {
			if c.ctx.Err() == nil {
				c.setConn(func(cs *connState) { cs.State, cs.Session, cs.Error = connExpired, id, err.Error() })
			}
			return
		}
		switch ev.State {
		case zkrecipes.SessionSuspended:
			why := "the connection to ZooKeeper is down"
			if ev.Err != nil {
				why = ev.Err.Error()
			}
			c.setConn(func(cs *connState) { cs.State, cs.Session, cs.Error = connDisconnected, id, why })
		case zkrecipes.SessionConnected, zkrecipes.SessionReconnected:
			c.setConn(func(cs *connState) { cs.State, cs.Session, cs.Error = connConnected, id, "" })
		}
	}
}

// renew calls opts.NewSession until it gives a session or the console
// closes, pausing between attempts for a bound that doubles from 100 ms
// to 5 s (each pause drawn from its upper half).
func (c *console) renew() (*zkrecipes.Session, error) {
	bound := 100 * time.Millisecond
	for {
		s, err := c.opts.NewSession(c.ctx)
		if err == nil {
			return s, nil
		}
		if c.ctx.Err() != nil {
			return nil, c.ctx.Err()
		}
		c.setConn(func(cs *connState) { cs.Error = "making a new session: " + err.Error() })
		t := time.NewTimer(bound/2 + rand.N(bound/2+1))
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return nil, c.ctx.Err()
		}
		bound = min(2*bound, 5*time.Second)
	}
}
