package zktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/zkrecipes/zkrecipes/internal/jute"
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
// The session's own client, disconnected by the takeover, may reconnect
// and take the session back before the close is answered; the server then
// drops the takeover's connection. ExpireSession tries again, up to five
// times, and a session that is gone on a later try counts as ended.
//
// Each try is abandoned when ctx is done, or after Bound(10s) if ctx has
// no deadline.
func ExpireSession(ctx context.Context, addr string, sessionID int64, passwd []byte) error {
	var err error
	for try := range 5 {
		err = expireOnce(ctx, addr, sessionID, passwd)
		switch {
		case try > 0 && errors.Is(err, ErrNoSession):
			return nil
		case !errors.Is(err, errCloseUnanswered) || ctx.Err() != nil:
			return err
		}
	}
	return err
}

// errCloseUnanswered marks a close request whose connection ended before
// the answer.
var errCloseUnanswered = errors.New("connection ended before the close was answered")

func expireOnce(ctx context.Context, addr string, sessionID int64, passwd []byte) error {
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
	e := jute.NewFrameEncoder()
	e.Int32(1) // xid
	e.Int32(jute.OpCloseSession)
	if _, err := conn.Write(e.Frame()); err != nil {
		return fmt.Errorf("zktest: expire session 0x%x: %w", sessionID, err)
	}
	if _, err := readReply(conn, 1); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			err = fmt.Errorf("%w: %w", errCloseUnanswered, err)
		}
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
	e := jute.NewFrameEncoder()
	e.Int32(0) // protocolVersion
	e.Int64(0) // lastZxidSeen
	e.Int32(timeoutMs)
	e.Int64(id)
	e.Buffer(passwd)
	e.Bool(false) // readOnly
	if _, err := rw.Write(e.Frame()); err != nil {
		return session{}, err
	}
	p, err := jute.ReadFrame(rw, maxFrame)
	if err != nil {
		return session{}, fmt.Errorf("connect response: %w", err)
	}
	d := jute.NewDecoder(p)
	d.Int32() // protocolVersion
	s := session{timeout: d.Int32(), id: d.Int64(), passwd: d.Buffer()}
	if d.Err() != nil {
		return session{}, fmt.Errorf("connect response: %w", d.Err())
	}
	return s, nil
}

// readReply reads the reply to the request xid, skipping notifications
// and pings, and returns its body. A non-zero error code in the reply
// header is returned as an error.
func readReply(r io.Reader, xid int32) ([]byte, error) {
	for {
		p, err := jute.ReadFrame(r, maxFrame)
		if err != nil {
			return nil, err
		}
		d := jute.NewDecoder(p)
		got := d.Int32()
		d.Int64() // zxid
		code := d.Int32()
		if d.Err() != nil {
			return nil, d.Err()
		}
		if got != xid {
			continue
		}
		if code != 0 {
			return nil, fmt.Errorf("ZooKeeper error code %d", code)
		}
		return d.Rest(), nil
	}
}
