package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes/zkserver"
)

// serveFlags are zkr server's options.
type serveFlags struct {
	addr          string
	tick          time.Duration
	maxConnsPerIP int
	ttl           bool
	dataDir       string
}

func (a *app) newServerCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the embedded ZooKeeper-compatible server (zkserver) for local work",
		Long: `Run zkrecipes' embedded ZooKeeper-compatible server until interrupted. It
speaks ZooKeeper's wire protocol to any client (Go, Java, Python) and behaves
like a standalone ZooKeeper 3.8 where clients can tell, as far as zkrecipes'
conformance suite checks. It is for tests, demos and work on one machine; a
ZooKeeper ensemble remains the answer for anything more.

By default it keeps everything in memory: the tree is gone when it stops.
With --data-dir it keeps a transaction log, synced before each reply, and
snapshots in that directory, so a restart keeps the tree, the zxid and the
sessions (which clients must reconnect to within their timeout).

The address it listens on is printed on standard output.`,
		Example: `  zkr server                       # 127.0.0.1:2181
  zkr server --addr 127.0.0.1:0    # a free port, printed
  zkr server --data-dir ./zkdata   # durable across restarts
  ZKR_SERVERS=127.0.0.1:2181 zkr lock /locks/x -- make`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:2181", "host:port to listen on (port 0: a free one)")
	fl.DurationVar(&f.tick, "tick", 2*time.Second, "tickTime: session timeouts are negotiated into [2, 20] x tick")
	fl.IntVar(&f.maxConnsPerIP, "max-conns-per-ip", 0, "limit connections from one address (maxClientCnxns); 0: no limit")
	fl.BoolVar(&f.ttl, "ttl", false, "allow TTL nodes (zookeeper.extendedTypesEnabled)")
	fl.StringVar(&f.dataDir, "data-dir", "", "directory for the transaction log and snapshots (created if missing); empty: in memory")
	return cmd
}

func (a *app) serve(f serveFlags) error {
	if f.tick <= 0 {
		return usagef("--tick %v: must be positive", f.tick)
	}
	if f.maxConnsPerIP < 0 {
		return usagef("--max-conns-per-ip %d: must not be negative", f.maxConnsPerIP)
	}
	srv := zkserver.NewServer(zkserver.Options{
		TickTime:          f.tick,
		MaxSessionTimeout: 20 * f.tick,
		MaxConnsPerIP:     f.maxConnsPerIP,
		TTLEnabled:        f.ttl,
		DataDir:           f.dataDir,
	})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	if err := srv.Start(f.addr); err != nil {
		return withCode(exitConnect, fmt.Errorf("start on %s: %w", f.addr, err))
	}
	defer srv.Close()
	fmt.Fprintln(a.stdout, srv.Addr())
	where := "in memory"
	if f.dataDir != "" {
		where = "data in " + f.dataDir
	}
	fmt.Fprintf(a.stderr, "zkr server: zkserver listening on %s (%s; Ctrl-C stops it)\n", srv.Addr(), where)
	fmt.Fprintf(a.stderr, "zkr server: %v: stopping\n", <-sig)
	return nil
}
