package zktest

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrNoSession reports that the server does not know the session: it has
// expired or been closed already.
var ErrNoSession = errors.New("zktest: no such session")

// ExpireSession makes the server at addr end the session sessionID, as if
// it had expired. It connects to the session with its password passwd (the
// server moves the session to this new connection and disconnects the
// session's current client), then closes the session. When ExpireSession
// returns nil, the session is gone and its ephemeral nodes are deleted; the
// original client finds itself disconnected and, on reconnecting, learns
// that its session expired, just as after a real expiry. If the session
// did not exist anymore, the error wraps ErrNoSession.
//
// The exchange is abandoned when ctx is done, or after 10 seconds if ctx
// has no deadline.
func ExpireSession(ctx context.Context, addr string, sessionID int64, passwd []byte) error {
	conn, done, err := dial(ctx, addr)
	if err != nil {
		return fmt.Errorf("zktest: expire session 0x%x: %w", sessionID, err)
	}
	defer done()
	s, err := handshake(conn, sessionID, passwd, 30000)
	if err != nil {
		return fmt.Errorf("zktest: expire session 0x%x: %w", sessionID, err)
	}
	if s.id == 0 {
		return fmt.Errorf("zktest: expire session 0x%x: %w", sessionID, ErrNoSession)
	}
	if s.id != sessionID {
		return fmt.Errorf("zktest: expire session 0x%x: server attached session 0x%x", sessionID, s.id)
	}
	e := newEncoder()
	e.int32(1) // xid
	e.int32(opCloseSession)
	if _, err := conn.Write(e.frame()); err != nil {
		return fmt.Errorf("zktest: expire session 0x%x: %w", sessionID, err)
	}
	if _, err := readReply(conn, 1); err != nil {
		return fmt.Errorf("zktest: expire session 0x%x: close: %w", sessionID, err)
	}
	return nil
}

// session is what a ConnectResponse tells a client.
type session struct {
	id      int64
	passwd  []byte
	timeout int32 // milliseconds
}

// handshake sends a ConnectRequest for session id (0 for a new session)
// on conn and returns the server's ConnectResponse. A returned id of 0
// means the server does not know the requested session.
func handshake(rw io.ReadWriter, id int64, passwd []byte, timeoutMs int32) (session, error) {
	e := newEncoder()
	e.int32(0) // protocolVersion
	e.int64(0) // lastZxidSeen
	e.int32(timeoutMs)
	e.int64(id)
	e.buffer(passwd)
	e.byte(0) // readOnly
	if _, err := rw.Write(e.frame()); err != nil {
		return session{}, err
	}
	p, err := readFrame(rw)
	if err != nil {
		return session{}, fmt.Errorf("connect response: %w", err)
	}
	d := &decoder{b: p}
	d.int32() // protocolVersion
	s := session{timeout: d.int32(), id: d.int64(), passwd: d.buffer()}
	if d.err != nil {
		return session{}, fmt.Errorf("connect response: %w", d.err)
	}
	return s, nil
}

// readReply reads the reply to the request xid, skipping notifications
// and pings, and returns its body. A non-zero error code in the reply
// header is returned as an error.
func readReply(r io.Reader, xid int32) ([]byte, error) {
	for {
		p, err := readFrame(r)
		if err != nil {
			return nil, err
		}
		d := &decoder{b: p}
		got := d.int32()
		d.int64() // zxid
		code := d.int32()
		if d.err != nil {
			return nil, d.err
		}
		if got != xid {
			continue
		}
		if code != 0 {
			return nil, fmt.Errorf("ZooKeeper error code %d", code)
		}
		return d.b, nil
	}
}
