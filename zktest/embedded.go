package zktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/zkserver"
)

// ServerEnv names the environment variable that chooses what Start runs
// for a standalone server (Options.Servers <= 1): "zookeeper" starts a
// real ZooKeeper in a JVM, "zkserver" the embedded zkserver in this
// process. Unset, it means "zookeeper" when a ZooKeeper installation is
// found (see [Available]) or the environment variable CI is set, and
// otherwise "zkserver": then the first Start or Available of the process
// says so on standard error, once, and a test that needs real ZooKeeper
// skips, saying why. Ensembles, servers with Options.TLS or Kerberos
// (zkserver has neither here) and Options.RealZooKeeper always run real
// ZooKeeper.
const ServerEnv = "ZKTEST_SERVER"

// fallbackNote makes the note that the embedded server stands in for a
// missing ZooKeeper appear once per process (per test binary).
var fallbackNote sync.Once

// serverKind returns the server kind ServerEnv selects, and with ServerEnv
// unset the fallback to zkserver when no ZooKeeper is installed outside CI.
func serverKind() (string, error) {
	switch v := os.Getenv(ServerEnv); v {
	case "":
		if err := missingZooKeeper(); err != nil {
			fallbackNote.Do(func() {
				fmt.Fprintf(os.Stderr, "zktest: no ZooKeeper installation found (%s); tests run on the embedded zkserver and those that need real ZooKeeper skip; set %s=zookeeper or CI=true to require it\n",
					strings.TrimPrefix(err.Error(), "zktest: "), ServerEnv)
			})
			return "zkserver", nil
		}
		return "zookeeper", nil
	case "zookeeper":
		return "zookeeper", nil
	case "zkserver":
		return "zkserver", nil
	default:
		return "", fmt.Errorf("zktest: %s=%q: want zookeeper or zkserver", ServerEnv, v)
	}
}

// missingZooKeeper returns why the embedded server stands in for ZooKeeper
// when ServerEnv is unset: what findJVM found missing, outside CI. It
// returns nil when ZooKeeper is installed or CI is set.
func missingZooKeeper() error {
	if inCI() {
		return nil
	}
	_, err := findJVM()
	return err
}

// realOnly returns what in opts only real ZooKeeper has, or "" if the
// embedded server can serve opts.
func realOnly(opts Options) string {
	switch {
	case opts.RealZooKeeper:
		return "Options.RealZooKeeper"
	case opts.Servers > 1:
		return fmt.Sprintf("an ensemble of %d members", opts.Servers)
	case opts.TLS:
		return "Options.TLS"
	case opts.Kerberos != nil:
		return "Options.Kerberos"
	case opts.Reconfig:
		return "Options.Reconfig"
	}
	return ""
}

// useEmbedded reports whether Start should run zkserver for opts.
func useEmbedded(opts Options) (bool, error) {
	kind, err := serverKind()
	return kind == "zkserver" && realOnly(opts) == "", err
}

// needsReal explains err, findJVM's report of a missing Java or
// ZooKeeper, when opts asked for what only real ZooKeeper has.
func needsReal(opts Options, err error) error {
	var u *unavailableError
	if why := realOnly(opts); why != "" && errors.As(err, &u) {
		return &unavailableError{"real ZooKeeper is needed (" + why + ") and not installed: " + u.msg}
	}
	return err
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
