package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes/internal/bench"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// measureServers returns the servers demo and bench run on: those the user
// gave (--servers or $ZKR_SERVERS), after checking that they answer, or a
// throwaway server started for the run and stopped by stop, saying which on
// stderr. With embedded (the demo) that is zkserver, in this process: no
// Java needed. Otherwise (bench, whose figures are about ZooKeeper) it is a
// real Apache ZooKeeper started through zktest with opts, warmed up first
// when opts.Production is set. root is the chroot of the user's servers
// ("" if none), under which the runs' paths go.
//
// The workloads open their sessions with nothing but the addresses: on the
// user's servers, TLS and credentials are refused; on a throwaway server
// they do not apply.
func (a *app) measureServers(ctx context.Context, cmd *cobra.Command, embedded bool, opts zktest.Options) (servers []string, root string, stop func(), err error) {
	name := cmd.CommandPath()
	servers, root, chosen, err := a.serverList()
	if err != nil {
		return nil, "", nil, err
	}
	if chosen {
		if _, secured, err := a.security(); err != nil {
			return nil, "", nil, err
		} else if secured {
			return nil, "", nil, usagef("cannot use TLS or credentials: the workloads connect in plain text without them (unset --tls-ca, --tls-cert, --tls-key, --auth, --sasl-user, --sasl-password, --kerberos-principal and their $ZKR_ variables)")
		}
		s, err := a.connect(ctx, false)
		if err != nil {
			return nil, "", nil, err
		}
		s.Close()
		fmt.Fprintf(a.stderr, "%s: using ZooKeeper at %s%s\n", name, strings.Join(servers, ","), root)
		return servers, root, func() {}, nil
	}
	if embedded {
		srv, err := zkserver.Run()
		if err != nil {
			return nil, "", nil, withCode(exitConnect, fmt.Errorf("starting the embedded server: %w", err))
		}
		fmt.Fprintf(a.stderr, "%s: no --servers given: running on zkrecipes' embedded ZooKeeper-compatible server (zkserver) at %s; pass --servers to use a ZooKeeper ensemble\n", name, srv.Addr())
		return []string{srv.Addr()}, "", srv.Close, nil
	}
	if err := zktest.Available(); err != nil {
		return nil, "", nil, withCode(exitConnect, fmt.Errorf("no --servers given, and cannot start a ZooKeeper here (pass --servers host:port to use one): %w", err))
	}
	fmt.Fprintf(a.stderr, "%s: no --servers given: starting a throwaway Apache ZooKeeper (Java, through zktest)...\n", name)
	c, err := zktest.Start(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", nil, ctx.Err()
		}
		return nil, "", nil, withCode(exitConnect, fmt.Errorf("starting ZooKeeper: %w", err))
	}
	fmt.Fprintf(a.stderr, "%s: running on a throwaway ZooKeeper at %s (standalone, temporary directory, removed at the end)\n", name, strings.Join(c.Addrs(), ","))
	if opts.Production {
		// A fresh JVM is slow until its compiler has seen the request
		// paths; without this the first recipe measured pays for it.
		fmt.Fprintf(a.stderr, "%s: warming the server up...\n", name)
		if err := bench.Warm(ctx, c.Addrs(), "/zkr-warm"); err != nil {
			c.Close()
			return nil, "", nil, err
		}
	}
	return c.Addrs(), "", func() { c.Close() }, nil
}
