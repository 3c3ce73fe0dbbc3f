package zkserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// session is a client session; it outlives connections.
type session struct {
	id       int64
	passwd   []byte
	timeout  time.Duration
	deadline time.Time
	conn     *conn // current connection, or nil
}

func (s *session) touch(now time.Time) { s.deadline = now.Add(s.timeout) }

// password derives the session's password from the server's secret.
func (s *Server) password(id int64) []byte {
	m := hmac.New(sha256.New, s.secret[:])
	binary.Write(m, binary.BigEndian, id)
	return m.Sum(nil)[:16]
}

// newSessionID returns a fresh session id: the current time in
// milliseconds shifted as ZooKeeper does, with the server id a
// standalone ZooKeeper's session tracker uses (1) in the top byte, then
// incremented.
func (s *Server) newSessionID() int64 {
	if s.nextSession == 0 {
		s.nextSession = int64(uint64(time.Now().UnixMilli()<<24)>>8 | 1<<56)
	}
	s.nextSession++
	return s.nextSession
}

// connect answers a ConnectRequest and reports whether the connection
// goes on.
func (s *Server) connect(c *conn, req *jute.ConnectRequest) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.countRecv()
	if s.err != nil {
		return false // failed: nothing more is acknowledged
	}
	if req.LastZxidSeen > s.zxid {
		return false // the client has seen a future: ZooKeeper refuses silently
	}
	resp := jute.ConnectResponse{HasReadOnly: req.HasReadOnly, Passwd: make([]byte, 16)}
	timeout := s.opts.negotiate(req.TimeOut)
	now := time.Now()
	var sess *session
	if req.SessionID != 0 {
		sess = s.sessions[req.SessionID]
		if sess == nil || string(sess.passwd) != string(req.Passwd) {
			s.sendConnect(c, &resp)
			c.closeAfterFlush()
			return false
		}
		if old := sess.conn; old != nil && old != c {
			old.sess = nil
			s.watches.removeConn(old)
			old.closeNow()
		}
	} else {
		id := s.newSessionID()
		sess = &session{id: id, passwd: s.password(id)}
		s.sessions[id] = sess
		s.zxid++ // createSession is a transaction
		sess.timeout = timeout
		if s.wal != nil {
			s.logRecord(sessionRecord(s.zxid, sess))
		}
	}
	sess.timeout = timeout
	sess.touch(now)
	sess.conn = c
	c.sess, c.sid = sess, sess.id
	resp.TimeOut = int32(timeout / time.Millisecond)
	resp.SessionID = sess.id
	resp.Passwd = sess.passwd
	s.sendConnect(c, &resp)
	return true
}

func (s *Server) sendConnect(c *conn, resp *jute.ConnectResponse) {
	e := jute.NewFrameEncoder()
	resp.Encode(e)
	c.countSent()
	c.send(e.Frame())
}

// expireSessions closes every session whose deadline has passed. It is
// called with s.mu held.
func (s *Server) expireSessions(now time.Time) {
	for _, sess := range s.sessions {
		if now.After(sess.deadline) {
			if _, c := s.closeSession(sess); c != nil {
				c.closeAfterFlush()
			}
		}
	}
}

// closeSession ends a session in one transaction: its ephemeral nodes are
// deleted and watches fire. It returns the transaction's zxid and the
// session's connection (or nil), which the caller closes. Called with s.mu
// held.
func (s *Server) closeSession(sess *session) (int64, *conn) {
	x := s.begin()
	x.closed = sess.id
	for _, p := range s.tree.sessionEphemerals(sess.id, "/") {
		x.remove(p)
	}
	s.commit(x)
	delete(s.sessions, sess.id)
	delete(s.tree.ephemerals, sess.id)
	c := sess.conn
	if c != nil {
		c.sess = nil
	}
	return x.zxid, c
}
