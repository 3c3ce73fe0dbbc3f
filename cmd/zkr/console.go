package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

func (a *app) newConsoleCmd() *cobra.Command {
	var (
		addr        string
		allowWrites bool
		public      bool
	)
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve a web page that shows the tree and the recipes under a path, live",
		Long: `Serve, on --addr, a web page that browses ZooKeeper and the recipes in it,
live, from a browser on this machine. It has three views of the subtree
chosen at the top of the page (/ by default):

  Tree      the nodes, each node's children listed page by page, sorted,
            with a filter that the server applies, so a node of 100,000
            children stays usable (the page draws only the rows in view);
            child counts; a node's data as text, JSON or hex; its stat and
            ACL.
  Recipes   every lock, read/write lock and election under the subtree (zkr's,
            Curator's and kazoo's, as zkr inspect recognises them): who holds
            or leads, who waits, and whom each waiter watches, drawn as a
            chain; each contender's id (its node's data), session and age; a
            node whose session is connected to no server (the "cons"
            four-letter word) flagged as an orphan. Also every semaphore
            (its leases), work queue and locking queue (its items), service
            (its instances), group (its members) and double barrier that
            zkr inspect recognises.
  Ensemble  each server of --servers: mode, latency, outstanding requests,
            znode and watch counts (srvr, mntr), with sparklines of the last
            two minutes; the connected sessions (cons).

The page follows its subtree over one persistent recursive watch (a Cache,
ZooKeeper 3.6 or later), shared by every page that shows the same subtree,
and updates within a second of a change, pushed as server-sent events.
That watch keeps a copy of the subtree (its nodes' data and stats) in zkr's
memory, read once when a page first shows it (about two requests a node):
show the subtree you look at, not / of a tree of millions of nodes.
Its assets are in the zkr binary: it loads nothing from elsewhere, and its
Content-Security-Policy lets it run no script but its own. A page address
can name the view and the subtree: /?view=recipes&path=/locks.

The console is read-only unless --allow-writes is given. Writes (create,
set, delete, and a node's ACL, set from entries scheme:id:perms as acl set
takes them, only if the ACL is still at the version the page read) then
need the token zkr prints when it starts: the printed address carries it in
its #fragment, which the browser never sends; the page keeps it for the tab
and sends it in a header. A write from another site's page (a form post, a
fetch) is refused, and deleting a node with its children needs its path
typed again. The console's own session creates no ephemeral nodes.

--addr must be a loopback address unless --public is given; a public
console needs the token for every request, reads included. It speaks plain
HTTP: put it behind a TLS proxy if it leaves the machine. It runs until
interrupted. When its ZooKeeper connection is down, the page says so (and
that what it shows may be stale) and catches up once it is back; when its
session expires, the console makes a new one (again, with a pause growing
to 5 s, while that fails) and follows the shown subtrees on it. The page
retries a listing that fails meanwhile (an answer 5xx, or none), with a
pause growing to 5 s, and says so; a node found deleted leaves the tree.
JSON API (the page's): /api/children, /api/node, /api/recipes,
/api/health, /api/events (GET, ?path=...), /api/create, /api/set,
/api/delete, /api/acl (POST, JSON, with the token).`,
		Example: `  zkr console
  zkr console --addr 127.0.0.1:9000 --allow-writes
  zkr --servers zk1:2181,zk2:2181/app console`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.console(cmd, addr, allowWrites, public)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8080", "serve the page on this host:port")
	f.BoolVar(&allowWrites, "allow-writes", false, "let the page create, set and delete nodes and set ACLs (with the printed token)")
	f.BoolVar(&public, "public", false, "allow a non-loopback --addr; every request then needs the printed token")
	return cmd
}

// loopbackAddr tells whether host:port names only this machine: a
// loopback IP or "localhost".
func loopbackAddr(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// newToken returns a random token of 128 bits, in hex.
func newToken() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand's contract since Go 1.24)
	return hex.EncodeToString(b)
}

func (a *app) console(cmd *cobra.Command, addr string, allowWrites, public bool) error {
	loopback, err := loopbackAddr(addr)
	if err != nil {
		return usagef("--addr %q: %v", addr, err)
	}
	if !loopback && !public {
		return usagef("--addr %q is not a loopback address: the console would show the tree to the network; give --public to mean it (every request then needs the printed token)", addr)
	}
	servers, _, _, err := a.serverList()
	if err != nil {
		return err
	}
	tlsCfg, err := a.tlsConfig()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return codef(exitFailure, "console: %v", err)
	}
	defer ln.Close()
	return a.session(cmd, nil, func(ctx context.Context, s *zkrecipes.Session) error {
		c := newConsole(s, consoleOptions{
			Servers:      servers,
			TLS:          tlsCfg,
			AllowWrites:  allowWrites,
			RequireToken: !loopback,
			Token:        newToken(),
			NewSession: func(ctx context.Context) (*zkrecipes.Session, error) {
				fmt.Fprintf(a.stderr, "zkr console: the ZooKeeper session ended; making a new one\n")
				s, err := a.connect(ctx, false)
				if err != nil {
					if ctx.Err() == nil {
						fmt.Fprintf(a.stderr, "zkr console: %v\n", err)
					}
					return nil, err
				}
				fmt.Fprintf(a.stderr, "zkr console: new session 0x%x\n", s.ID())
				return s, nil
			},
		})
		defer c.Close()
		url := "http://" + ln.Addr().String() + "/"
		if allowWrites || !loopback {
			fmt.Fprintf(a.stdout, "zkr console: serving %s#token=%s\n", url, c.opts.Token)
			fmt.Fprintf(a.stdout, "zkr console: token %s (writes %s)\n", c.opts.Token, map[bool]string{true: "allowed", false: "refused"}[allowWrites])
		} else {
			fmt.Fprintf(a.stdout, "zkr console: serving %s (read-only)\n", url)
		}
		srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		var err error
		select {
		case err = <-done:
		case <-ctx.Done():
		}
		c.Close() // ends the event streams, so that Shutdown need not wait for them
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if serr := srv.Shutdown(sctx); err == nil && serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = serr
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		return err
	})
}
