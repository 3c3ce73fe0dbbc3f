package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes/zkserver"
)

// measureServers returns the servers demo and bench run on: those the user
// gave (--servers or $ZKR_SERVERS), after checking that they answer. Without
// them, the demo (embedded) runs on a throwaway zkserver, in this process:
// no Java needed; bench, whose figures are about the user's ZooKeeper,
// refuses. root is the chroot of the user's servers ("" if none), under
// which the runs' paths go.
//
// The workloads open their sessions with nothing but the addresses: on the
// user's servers, TLS and credentials are refused; on a throwaway server
// they do not apply.
func (a *app) measureServers(ctx context.Context, cmd *cobra.Command, embedded bool) (servers []string, root string, stop func(), err error) {
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
	if !embedded {
		return nil, "", nil, usagef("no --servers given: %s measures the ZooKeeper you point it at (--servers host:port or $ZKR_SERVERS); to compare on a throwaway ZooKeeper, with go-zookeeper/zk too, run the benchmarks of internal/gozk in a checkout", name)
	}
	srv, err := zkserver.Run()
	if err != nil {
		return nil, "", nil, withCode(exitConnect, fmt.Errorf("starting the embedded server: %w", err))
	}
	fmt.Fprintf(a.stderr, "%s: no --servers given: running on zkrecipes' embedded ZooKeeper-compatible server (zkserver) at %s; pass --servers to use a ZooKeeper ensemble\n", name, srv.Addr())
	return []string{srv.Addr()}, "", srv.Close, nil
}
