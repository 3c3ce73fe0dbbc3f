package zktest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// defaultIOTimeout bounds network exchanges whose context has no deadline.
const defaultIOTimeout = 10 * time.Second

// FourLetter sends the four-letter-word command cmd (such as "ruok", "srvr",
// "stat", "mntr" or "cons") to the server at addr on a fresh TCP connection
// and returns the server's whole answer, read until the server closes the
// connection. The exchange is abandoned when ctx is done, or after 10
// seconds if ctx has no deadline.
func FourLetter(ctx context.Context, addr, cmd string) (string, error) {
	if len(cmd) != 4 {
		return "", fmt.Errorf("zktest: four-letter word %q is not four bytes long", cmd)
	}
	conn, done, err := dial(ctx, addr)
	if err != nil {
		return "", fmt.Errorf("zktest: %s to %s: %w", cmd, addr, err)
	}
	defer done()
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", fmt.Errorf("zktest: %s to %s: %w", cmd, addr, err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("zktest: %s to %s: %w", cmd, addr, err)
	}
	return string(b), nil
}

// dial connects to addr and bounds the connection's life by ctx, or by
// defaultIOTimeout if ctx has no deadline. The returned function closes the
// connection and releases its resources.
func dial(ctx context.Context, addr string) (net.Conn, func(), error) {
	cancel := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, defaultIOTimeout)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	return conn, func() {
		stop()
		cancel()
		conn.Close()
	}, nil
}

// serverMode extracts the value of the "Mode:" line of a srvr answer.
func serverMode(srvr string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(srvr))
	for sc.Scan() {
		if mode, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(mode), true
		}
	}
	return "", false
}

var totalWatches = regexp.MustCompile(`Total watches:\s*(\d+)`)

// Watches returns the number of watches the server at addr holds, from its
// answer to the four-letter word "wchs".
func Watches(ctx context.Context, addr string) (int, error) {
	out, err := FourLetter(ctx, addr, "wchs")
	if err != nil {
		return 0, err
	}
	m := totalWatches.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("zktest: wchs to %s: no total in %q", addr, out)
	}
	return strconv.Atoi(m[1])
}
