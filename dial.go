package zkrecipes

import (
	"encoding/binary"
	"errors"
	"net"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

var errRefused = errors.New("zkrecipes: session is over; no new connection")

// dial is the client's dialer. It refuses once the session is over, so the
// client cannot silently start a new session, and it watches what the server
// sends: the time of the last bytes read (for strict loss detection) and the
// connect response (session id, password, negotiated timeout).
func (s *Session) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if s.refuse.Load() {
		return nil, errRefused
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, s: s}, nil
}

// watchedConn is a client connection whose reads are observed.
type watchedConn struct {
	net.Conn
	s      *Session
	first  []byte // bytes of the connect response read so far
	parsed bool
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.s.lastRead.Store(time.Now().UnixNano())
		if !c.parsed && !c.feed(p[:n]) {
			c.Conn.Close()
			return 0, errRefused
		}
	}
	return n, err
}

// feed collects the connect response, the first frame the server sends:
// length, protocolVersion int32, timeOut int32, sessionId int64, passwd
// buffer. It reports false when the server handed us a different session
// than ours, which must not be used.
func (c *watchedConn) feed(b []byte) bool {
	c.first = append(c.first, b...)
	if len(c.first) < 4 {
		return true
	}
	size := int(binary.BigEndian.Uint32(c.first))
	if len(c.first) < 4+size {
		return true
	}
	c.parsed = true
	r := jute.NewDecoder(c.first[4 : 4+size])
	c.first = nil
	r.Int32() // protocolVersion
	timeout := time.Duration(r.Int32()) * time.Millisecond
	id := r.Int64()
	passwd := r.Buffer()
	if r.Err() != nil {
		return true // malformed: the client will fail on it by itself
	}
	return c.s.established(id, passwd, timeout)
}

// established records the session the server granted on a connection. An id
// of 0 means the session expired; the client reports that itself. A
// different id than the one we had means a new session: refused.
func (s *Session) established(id int64, passwd []byte, timeout time.Duration) bool {
	if id == 0 {
		return true
	}
	s.mu.Lock()
	if s.id == 0 {
		s.id, s.passwd, s.timeout = id, passwd, timeout
		s.mu.Unlock()
		return true
	}
	same := s.id == id
	if same {
		s.timeout = timeout
	}
	s.mu.Unlock()
	if !same {
		s.end(ErrSessionExpired)
	}
	return same
}
