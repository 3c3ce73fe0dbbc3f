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
		Long: `Serve, on --addr, a web page that browses ZooKeeper: the tree (children listed
page by page, with a filter, so that a node of 100,000 children stays usable;
data as text, JSON or hex; stat; ACL), the recipes under a path (every lock,
read/write lock and election, as zkr inspect sees them: who holds or leads,
who waits for whom, drawn as a chain, with sessions, ages, ids, and orphaned
nodes flagged), and the ensemble's health (each server's mode, latency,
outstanding requests, znode and watch counts, connected sessions).

The page follows the subtree it shows over one persistent recursive watch
(ZooKeeper 3.6 or later), and updates within a second of a change. Its
assets are in the zkr binary: it loads nothing from elsewhere.

The console is read-only unless --allow-writes is given; writes (create,
set, delete) then need the token zkr prints when it starts, which the
printed address carries in its #fragment (the page sends it in a header,
never in a URL), and are refused from other sites. Deleting a node with
its children needs its path typed again.

--addr must be a loopback address unless --public is given; a public
console needs the token for every request, reads included. Serve it
behind TLS (a reverse proxy) if it leaves the machine: the token and the
data cross the network in the clear otherwise.`,
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
	f.BoolVar(&allowWrites, "allow-writes", false, "let the page create, set and delete nodes (with the printed token)")
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
		case <-s.Done():
			err = codef(exitFailure, "console: the ZooKeeper session ended (%v); start zkr console again", s.Err())
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
