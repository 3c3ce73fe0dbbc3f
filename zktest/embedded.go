package zktest

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/zkrecipes/zkrecipes/zkserver"
)

// ServerEnv names the environment variable that chooses what Start runs
// for a standalone server (Options.Servers <= 1): "zookeeper" (the
// default) starts a real ZooKeeper in a JVM, "zkserver" the embedded
// zkserver in this process. Ensembles, and servers with Options.TLS
// (zkserver has no TLS), always run real ZooKeeper.
const ServerEnv = "ZKTEST_SERVER"

// serverKind returns the server kind ServerEnv selects.
func serverKind() (string, error) {
	switch v := os.Getenv(ServerEnv); v {
	case "", "zookeeper":
		return "zookeeper", nil
	case "zkserver":
		return "zkserver", nil
	default:
		return "", fmt.Errorf("zktest: %s=%q: want zookeeper or zkserver", ServerEnv, v)
	}
}

// useEmbedded reports whether Start should run zkserver for opts.
func useEmbedded(opts Options) (bool, error) {
	kind, err := serverKind()
	return kind == "zkserver" && opts.Servers <= 1 && !opts.TLS && opts.Kerberos == nil, err
}

// startEmbedded returns a Cluster of one member served by zkserver, with
// the tick and session timeout bounds a real server would get from
// config, and the same SASL users.
func startEmbedded(opts Options) (*Cluster, error) {
	tick := opts.TickTime
	s := zkserver.NewServer(zkserver.Options{
		TickTime:          tick,
		TTLEnabled:        opts.TTL,
		MinSessionTimeout: 2 * tick,
		MaxSessionTimeout: max(60*time.Second, 2*tick),
		SASLUsers:         opts.SASLUsers,
		RequireSASL:       opts.RequireSASL,
	})
	if err := s.Start("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	return &Cluster{opts: opts, emb: s}, nil
}

// The embedded counterparts of the Cluster methods; member 0 is the only
// one.

func (c *Cluster) embCheck(i int) {
	if i != 0 {
		panic(fmt.Sprintf("zktest: member %d out of range [0, 1)", i))
	}
}

func (c *Cluster) embRestart(ctx context.Context) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("zktest: restart member 1: cluster is closed")
	}
	if c.emb.Running() {
		return fmt.Errorf("zktest: member 1 is already running")
	}
	var err error
	for ctx.Err() == nil {
		if err = c.emb.Start(c.emb.Addr()); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond) // the port may linger briefly
	}
	return fmt.Errorf("zktest: restart member 1: %w (%w)", ctx.Err(), err)
}

func (c *Cluster) embMode(ctx context.Context) (string, error) {
	if !c.emb.Running() {
		return "", fmt.Errorf("zktest: member 1 (%s) is not serving", c.emb.Addr())
	}
	return "standalone", nil
}
