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

// defaultIOTimeout bounds network exchanges whose context has no deadline
// (scaled, see Bound).
func defaultIOTimeout() time.Duration { return Bound(10 * time.Second) }

// FourLetter sends the four-letter-word command cmd (such as "ruok", "srvr",
// "stat", "mntr" or "cons") to the server at addr on a fresh TCP connection
// and returns the server's whole answer, read until the server closes the
// connection. The exchange is abandoned when ctx is done, or after
// Bound(10s) if ctx has no deadline.
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
		ctx, cancel = context.WithTimeout(ctx, defaultIOTimeout())
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

// Watchers returns how many watch registrations the server at addr holds
// on the node at path, from its answer to the four-letter word "wchp"
// (one line per session under each watched path, data and child watches
// listed apart). Unlike [Watches], a count per path is not disturbed by
// the watches of other tests.
func Watchers(ctx context.Context, addr, path string) (int, error) {
	return countWatchers(ctx, addr, func(p string) bool { return p == path })
}

// WatchersUnder is [Watchers] for root and every node below it: the
// watches of one test that works under root, whatever other tests watch.
func WatchersUnder(ctx context.Context, addr, root string) (int, error) {
	root = strings.TrimSuffix(root, "/")
	return countWatchers(ctx, addr, func(p string) bool {
		return p == root || strings.HasPrefix(p, root+"/")
	})
}

func countWatchers(ctx context.Context, addr string, match func(path string) bool) (int, error) {
	out, err := FourLetter(ctx, addr, "wchp")
	if err != nil {
		return 0, err
	}
	n, in := 0, false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "/"):
			in = match(l)
		case in && sessionLine.MatchString(l):
			n++
		}
	}
	return n, nil
}

var sessionLine = regexp.MustCompile(`^\s+0x[0-9a-f]+`)

// Sessions returns the ids of the sessions the server at addr tracks
// (connected or not, until they expire), from the session tracker part
// of its answer to the four-letter word "dump". It is meant for a
// standalone server: an ensemble's followers list only their own.
func Sessions(ctx context.Context, addr string) ([]int64, error) {
	out, err := FourLetter(ctx, addr, "dump")
	if err != nil {
		return nil, err
	}
	head, _, ok := strings.Cut(out, "ephemeral nodes dump:")
	if !ok || !strings.Contains(head, "SessionTracker dump:") {
		return nil, fmt.Errorf("zktest: dump to %s: no session tracker in %q", addr, out)
	}
	var ids []int64
	for _, l := range strings.Split(head, "\n") {
		if !sessionLine.MatchString(l) {
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSpace(l)[2:], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("zktest: dump to %s: %q: %w", addr, l, err)
		}
		ids = append(ids, int64(id))
	}
	return ids, nil
}
