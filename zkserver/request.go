package zkserver

import (
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// process handles one request, read at start, and reports whether the
// connection goes on. bad is set for a request whose record did not
// decode (r then has only its header).
func (s *Server) process(c *conn, r *jute.Request, start time.Time, bad *malformed) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.countRecv()
	s.counters.requests[r.Op]++
	sess := c.sess
	if sess == nil || s.err != nil {
		return false // the session ended, or the server failed; the connection is closing
	}
	now := time.Now()
	sess.touch(now)
	c.lastOp, c.lastCxid = jute.OpAbbrev(r.Op), r.Xid
	defer func() {
		// The latency ZooKeeper reports: from reading the request to
		// queueing its reply.
		ms := time.Since(start).Milliseconds()
		c.lat.add(ms)
		s.stats.lat.add(ms)
		c.lastResp = time.Now()
	}()

	switch {
	case r.Op == jute.OpSASL:
		// As ZooKeeper, which answers SASL outside its request
		// pipeline; a malformed one closes the connection.
		return bad == nil && s.sasl(c, r)
	case s.opts.RequireSASL && r.Op != jute.OpAuth && !c.hasSASL():
		// ZooKeeper (sessionRequireClientSASLAuth) checks this before
		// anything else, pings included, and closes the connection.
		c.reply(r.Xid, 0, errSASLRequired, nil)
		c.closeAfterFlush()
		return false
	case bad != nil:
		// MarshallingError. ZooKeeper gives a write its zxid before it
		// reads the record, and reads a multiRead of writes only, failing
		// at the first with an empty result list.
		zxid := s.zxid
		if isWrite(r.Op) {
			x := s.begin()
			s.commit(x)
			zxid = x.zxid
		}
		var body []byte
		if bad.writesOnly {
			body = encodeResults(nil)
		}
		c.replyBody(r.Xid, zxid, jute.ErrMarshalling, body)
		return true
	case !jute.Known(r.Op):
		// ZooKeeper answers Unimplemented, then drops the connection.
		c.reply(r.Xid, -1, jute.ErrUnimplemented, nil)
		return false
	}
	switch r.Op {
	case jute.OpPing:
		c.reply(jute.XidPing, s.zxid, 0, nil)
	case jute.OpAuth:
		id, ok := s.authenticate(c, r.Scheme, r.Auth)
		if !ok {
			s.stats.authFailed++
			c.reply(r.Xid, 0, jute.ErrAuthFailed, nil)
			c.closeAfterFlush()
			return false
		}
		if !containsID(c.auth, id) {
			c.auth = append(c.auth, id)
		}
		c.reply(r.Xid, 0, 0, nil)
	case jute.OpCloseSession:
		zxid, _ := s.closeSession(sess)
		c.reply(r.Xid, zxid, 0, nil)
		c.closeAfterFlush()
		return false
	case jute.OpCheck:
		return false // ZooKeeper 3.8 drops a connection that sends check outside a multi
	case jute.OpSetWatches, jute.OpSetWatches2:
		s.setWatches(c, r)
		c.reply(r.Xid, s.zxid, 0, nil)
	default:
		if isWrite(r.Op) {
			zxid, code, body := s.writeTxn(c, r)
			c.lastZxid = zxid
			c.reply(r.Xid, zxid, code, body)
			return true
		}
		code, body := s.read(c, r)
		c.lastZxid = s.zxid
		c.reply(r.Xid, s.zxid, code, body)
	}
	return true
}
