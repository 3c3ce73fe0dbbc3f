// Package zkadmin asks a ZooKeeper server about itself, as an operator
// does: the four-letter words sent on the client port ([FourLetter], and
// parsed by [Ruok], [Srvr], [Mntr], [Cons], [Conf], [Envi], [Wchs], [Wchp],
// [Wchc] and [Dump]) and the commands of the AdminServer, ZooKeeper's HTTP
// interface ([Command]).
//
// A server answers only the four-letter words its 4lw.commands.whitelist
// names (ZooKeeper 3.5 and later allow "srvr" alone by default); the
// others are refused with [ErrNotAllowed]. A member that has no quorum
// answers most words with [ErrNotServing]. The parsed forms follow
// ZooKeeper 3.8's output, which has been stable since 3.5; [FourLetter]
// returns any answer as it is.
package zkadmin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// defaultTimeout bounds an exchange whose context has no deadline.
const defaultTimeout = 10 * time.Second

var (
	// ErrNotServing is returned when the server answers that it is not
	// serving requests (a member without a quorum).
	ErrNotServing = errors.New("zkadmin: the server is not currently serving requests")
	// ErrNotAllowed is returned when the server refuses a four-letter
	// word that its 4lw.commands.whitelist does not name.
	ErrNotAllowed = errors.New("zkadmin: the four-letter word is not in the server's 4lw.commands.whitelist")
)

// An Option changes how a request is sent.
type Option func(*config)

type config struct {
	tls  *tls.Config
	http *http.Client
}

// WithTLS sends four-letter words over TLS with cfg, to a server's secure
// client port.
func WithTLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithHTTPClient sends AdminServer commands with h instead of
// [http.DefaultClient].
func WithHTTPClient(h *http.Client) Option { return func(c *config) { c.http = h } }

func configure(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return c
}

// FourLetter sends the four-letter word word (such as "ruok", "srvr" or
// "mntr") to the server at addr ("host:port", its client port) on a fresh
// connection and returns the server's whole answer, read until the server
// closes the connection. The exchange is abandoned when ctx is done, or
// after 10 seconds if ctx has no deadline.
func FourLetter(ctx context.Context, addr, word string, opts ...Option) (string, error) {
	if len(word) != 4 {
		return "", fmt.Errorf("zkadmin: four-letter word %q is not four bytes long", word)
	}
	cfg := configure(opts)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultTimeout)
		defer cancel()
	}
	var conn net.Conn
	var err error
	if cfg.tls != nil {
		d := tls.Dialer{Config: cfg.tls}
		conn, err = d.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return "", fmt.Errorf("zkadmin: %s to %s: %w", word, addr, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := io.WriteString(conn, word); err != nil {
		return "", fmt.Errorf("zkadmin: %s to %s: %w", word, addr, err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", fmt.Errorf("zkadmin: %s to %s: %w", word, addr, err)
	}
	return string(b), nil
}

// ask sends word and turns the server's refusals into errors.
func ask(ctx context.Context, addr, word string, opts []Option) (string, error) {
	out, err := FourLetter(ctx, addr, word, opts...)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(out, "This ZooKeeper instance is not currently serving requests") {
		return "", fmt.Errorf("%w (%s to %s)", ErrNotServing, word, addr)
	}
	if strings.Contains(out, "is not executed because it is not in the whitelist") {
		return "", fmt.Errorf("%w (%s to %s)", ErrNotAllowed, word, addr)
	}
	return out, nil
}
