package zktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/zkserver"
)

// Cluster is a running standalone ZooKeeper server or ensemble started by
// Start. Members are numbered from 0 in the order of Addrs; ZooKeeper's
// myid of member i is i+1. Its methods are safe for concurrent use and
// panic if given a member index out of range.
type Cluster struct {
	opts    Options
	jvm     jvm
	dir     string
	members []*member
	emb     *zkserver.Server // the server when ZKTEST_SERVER=zkserver, else nil
	tls     *tlsMaterial     // the certificates when Options.TLS, else nil

	log *sharedWriter // the members' shared Options.Log, or nil

	mu     sync.Mutex // guards closed against starting processes, and members (AddMember)
	closed bool
	keep   bool // Close leaves dir (set by StartT for a failed test)

	closeOnce sync.Once
	closeErr  error
}

// Start starts a standalone ZooKeeper server (opts.Servers <= 1) or an
// ensemble of opts.Servers members, each in its own temporary directory and
// on its own free ports on 127.0.0.1, and returns once every member serves
// clients: srvr reports "Mode: standalone" for a standalone server and
// "Mode: leader" or "Mode: follower" for every ensemble member. Ensemble
// members start concurrently. If ctx has no deadline, Start gives up after
// Bound(90s).
//
// On failure, Start kills every process it started, removes its
// directories, and returns an error that quotes the end of the failing
// member's log. If a member found its port taken by another process, Start
// tries again with new ports. If Java or ZooKeeper is missing, Start
// returns an error that says so (SkipOrFail skips a test for it), or, when
// [ServerEnv] allows, runs the embedded server instead.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if err := checkSASLUsers(opts.SASLUsers); err != nil {
		return nil, err
	}
	if opts.RequireSASL && len(opts.SASLUsers) == 0 && opts.Kerberos == nil {
		return nil, fmt.Errorf("zktest: Options.RequireSASL needs SASLUsers or Kerberos")
	}
	if opts.Reconfig && opts.Servers < 2 {
		return nil, fmt.Errorf("zktest: Options.Reconfig needs an ensemble (Servers >= 2), not %d member", opts.Servers)
	}
	if opts.Kerberos != nil && len(opts.SASLUsers) > 0 {
		return nil, fmt.Errorf("zktest: Options.Kerberos and SASLUsers together: a ZooKeeper server offers one SASL mechanism")
	}
	if emb, err := useEmbedded(opts); err != nil {
		return nil, err
	} else if emb {
		return startEmbedded(opts)
	}
	j, err := findJVM()
	if err != nil {
		return nil, needsReal(opts, err)
	}
	if opts.TLS && !j.netty {
		return nil, &unavailableError{"Options.TLS needs Netty's jars on the class path (" + nettyHint + ")"}
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	for attempt := 1; ; attempt++ {
		c, err := start(ctx, opts, j)
		if err == nil || attempt == 3 || !errors.Is(err, errPortTaken) {
			return c, err
		}
	}
}

func start(ctx context.Context, opts Options, j jvm) (c *Cluster, err error) {
	dir, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	c = &Cluster{opts: opts, jvm: j, dir: dir}
	defer func() {
		if err != nil {
			c.Close()
			c = nil
		}
	}()
	if opts.TLS {
		if c.tls, err = newTLSMaterial(filepath.Join(dir, "tls")); err != nil {
			return nil, err
		}
	}
	if err := c.layout(); err != nil {
		return nil, err
	}
	if len(opts.SASLUsers) > 0 || opts.Kerberos != nil {
		if err := writeJAAS(ctx, c.members[0].jaasPath, opts); err != nil {
			return nil, err
		}
	}
	for _, m := range c.members {
		if err := m.start(j, opts); err != nil {
			return nil, err
		}
	}

	// Wait for all members together; the first failure ends the wait.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(c.members))
	for _, m := range c.members {
		go func() { errc <- c.waitServing(ctx, m) }()
	}
	var first error
	for range c.members {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return c, first
}

// layout creates the members' directories and configuration files.
func (c *Cluster) layout() error {
	n := c.opts.Servers
	per := c.portsPerMember()
	ports, err := freePorts(per * n)
	if err != nil {
		return err
	}
	if c.opts.Log != nil {
		c.log = &sharedWriter{w: c.opts.Log}
	}
	for i := range n {
		c.members = append(c.members, c.newMember(i+1, ports[per*i:per*(i+1)]))
	}
	for _, m := range c.members {
		if err := c.writeFiles(m, c.members); err != nil {
			return err
		}
	}
	return nil
}

// portsPerMember is how many ports each member listens on.
func (c *Cluster) portsPerMember() int {
	per := 3 // client, peer and election ports
	if c.tls != nil {
		per++ // and the secure client port
	}
	if c.opts.AdminServer {
		per++ // and the AdminServer's
	}
	return per
}

// newMember describes member id, on ports (portsPerMember of them).
func (c *Cluster) newMember(id int, ports []int) *member {
	dir := filepath.Join(c.dir, "zk"+strconv.Itoa(id))
	m := &member{
		id:           id,
		dir:          dir,
		dataDir:      filepath.Join(dir, "data"),
		cfgPath:      filepath.Join(dir, "zoo.cfg"),
		logPath:      filepath.Join(dir, "zookeeper.log"),
		clientPort:   ports[0],
		peerPort:     ports[1],
		electionPort: ports[2],
	}
	next := 3
	if c.tls != nil {
		m.securePort = ports[next]
		next++
	}
	if c.opts.AdminServer {
		m.adminPort = ports[next]
	}
	if len(c.opts.SASLUsers) > 0 || c.opts.Kerberos != nil {
		m.jaasPath = filepath.Join(c.dir, "jaas.conf") // shared by the members
	}
	if c.opts.Kerberos != nil {
		m.krb5Conf = c.opts.Kerberos.Config()
	}
	if c.log != nil {
		m.log, m.tail = c.log, new(tailBuffer)
	}
	return m
}

// writeFiles creates m's data directory, myid and zoo.cfg listing peers.
func (c *Cluster) writeFiles(m *member, peers []*member) error {
	if err := os.MkdirAll(m.dataDir, 0o755); err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	if len(peers) > 1 {
		myid := []byte(strconv.Itoa(m.id) + "\n")
		if err := os.WriteFile(filepath.Join(m.dataDir, "myid"), myid, 0o644); err != nil {
			return fmt.Errorf("zktest: %w", err)
		}
	}
	if err := os.WriteFile(m.cfgPath, []byte(config(c.opts, m, peers, c.tls)), 0o644); err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	return nil
}

// AddMember starts a new member of an ensemble started with
// Options.Reconfig and returns its index (its myid is index+1) once it
// serves clients. It joins as ZooKeeper's guide to dynamic
// reconfiguration says: its first configuration lists every member
// started so far and itself as an observer, so it finds the leader,
// adopts the committed configuration and follows without a vote. It is
// not a member of the ensemble's configuration until a client adds it
// with reconfig (zkclient's Reconfig with ServerSpec(i)). If ctx has no
// deadline, AddMember gives up after Bound(90s); on failure the new
// member is killed and the error quotes the end of its log.
func (c *Cluster) AddMember(ctx context.Context) (int, error) {
	if c.emb != nil || !c.opts.Reconfig {
		return 0, errors.New("zktest: AddMember needs an ensemble started with Options.Reconfig")
	}
	ports, err := freePorts(c.portsPerMember())
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, errors.New("zktest: add a member: cluster is closed")
	}
	m := c.newMember(len(c.members)+1, ports)
	m.joiner = true
	peers := append(append([]*member(nil), c.members...), m)
	err = c.writeFiles(m, peers)
	if err == nil {
		err = m.start(c.jvm, c.opts)
	}
	if err == nil {
		c.members = peers
	}
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if err := c.waitServing(ctx, m); err != nil {
		m.stop(syscall.SIGKILL, 0)
		return 0, err
	}
	return m.id - 1, nil
}

// ServerSpec returns member i's server line for a reconfig that adds it
// as a participant of an ensemble started with Options.Reconfig:
// "server.N=127.0.0.1:peer:election:participant;127.0.0.1:client".
func (c *Cluster) ServerSpec(i int) string {
	m := c.member(i)
	if m == nil {
		return ""
	}
	return m.spec("participant")
}

// waitServing polls m with srvr until it serves clients in the mode the
// cluster expects, the process exits, or ctx is done.
func (c *Cluster) waitServing(ctx context.Context, m *member) error {
	exited := m.exited()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		pollCtx, cancel := context.WithTimeout(ctx, time.Second)
		mode, err := m.mode(pollCtx)
		if err == nil && !c.serving(mode) {
			err = fmt.Errorf("mode %s", mode)
		}
		if err == nil && c.tls != nil {
			// A standalone server opens its secure port after it
			// answers on the plain one.
			err = c.checkSecure(pollCtx, m)
		}
		if err == nil && m.adminPort != 0 {
			// Jetty binds before the client port opens; a member that
			// could not start it (no servlet API) serves clients without.
			var done func()
			if _, done, err = dial(pollCtx, m.adminAddr()); err == nil {
				done()
			} else {
				err = fmt.Errorf("AdminServer: %w (is the servlet API, libservlet-api-java, installed?)", err)
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-exited:
			return m.failure("exited before serving", nil)
		case <-ctx.Done():
			return m.failure(fmt.Sprintf("not serving: %v (last check: %v)", ctx.Err(), last), ctx.Err())
		case <-tick.C:
		}
	}
}

// serving reports whether a member in mode serves as the cluster expects.
func (c *Cluster) serving(mode string) bool {
	if c.opts.Servers == 1 {
		return mode == "standalone"
	}
	return mode == "leader" || mode == "follower" || c.opts.Reconfig && mode == "observer"
}

func (c *Cluster) member(i int) *member {
	if c.emb != nil {
		c.embCheck(i)
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.members) {
		panic(fmt.Sprintf("zktest: member %d out of range [0, %d)", i, len(c.members)))
	}
	return c.members[i]
}

// Embedded reports whether c is the embedded zkserver rather than real
// ZooKeeper (see [ServerEnv]).
func (c *Cluster) Embedded() bool { return c.emb != nil }

// Addrs returns the client addresses ("127.0.0.1:port") of all members in
// index order. The slice is a copy.
func (c *Cluster) Addrs() []string {
	if c.emb != nil {
		return []string{c.emb.Addr()}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	addrs := make([]string, len(c.members))
	for i, m := range c.members {
		addrs[i] = m.addr()
	}
	return addrs
}

// Addr returns the client address ("127.0.0.1:port") of member i. It stays
// the same across Stop, Kill and Restart.
func (c *Cluster) Addr(i int) string {
	if c.member(i) == nil {
		return c.emb.Addr()
	}
	return c.member(i).addr()
}

// AdminURL returns the root URL of member i's AdminServer
// ("http://127.0.0.1:port"), or "" without Options.AdminServer or on the
// embedded server.
func (c *Cluster) AdminURL(i int) string {
	m := c.member(i)
	if m == nil || m.adminPort == 0 {
		return ""
	}
	return "http://" + m.adminAddr()
}

// Stop stops member i gracefully with SIGTERM and waits for it to exit; if
// it has not exited after 10 seconds it is killed. Stopping a member that
// is not running does nothing.
func (c *Cluster) Stop(i int) error {
	if c.member(i) == nil {
		c.emb.Stop()
		return nil
	}
	return c.member(i).stop(syscall.SIGTERM, stopGrace)
}

// Kill kills member i with SIGKILL, as a crash would, and waits for it to
// exit. Killing a member that is not running does nothing.
func (c *Cluster) Kill(i int) error {
	if c.member(i) == nil {
		c.emb.Stop()
		return nil
	}
	return c.member(i).stop(syscall.SIGKILL, 0)
}

// Pause stalls member i with SIGSTOP, as a long garbage collection or a
// frozen machine would: its connections stay open and silent, it neither
// answers clients nor takes part in the ensemble, until Resume. Pausing a
// member that is not running does nothing. The pause holds until Resume,
// Stop or Kill even if something else sends the member SIGCONT (a stall
// injector freezing and thawing the test's process tree): it is stopped
// again within milliseconds. (The embedded server cannot be paused:
// Pause returns an error for which SkipOrFail skips the test outside CI.)
func (c *Cluster) Pause(i int) error {
	if c.member(i) == nil {
		return errEmbeddedPause
	}
	return c.member(i).pause()
}

// errEmbeddedPause is what Pause and Resume return for the embedded server.
var errEmbeddedPause = &unavailableError{"real ZooKeeper is needed (pausing a member): the embedded server cannot be paused"}

// Resume lets member i go on after Pause (SIGCONT).
func (c *Cluster) Resume(i int) error {
	if c.member(i) == nil {
		return errEmbeddedPause
	}
	return c.member(i).resume()
}

// Restart starts the stopped or killed member i again with the same
// configuration, ports and data directory, and waits until it serves: a
// standalone server in mode standalone, an ensemble member as leader or
// follower (which needs a quorum of running members). If ctx has no
// deadline, Restart gives up after Bound(90s). On failure the member is
// killed again and the error quotes the end of its log.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	m := c.member(i)
	if m == nil {
		ctx, cancel := withDefaultTimeout(ctx)
		defer cancel()
		return c.embRestart(ctx)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("zktest: restart member %d: cluster is closed", m.id)
	}
	err := m.start(c.jvm, c.opts)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if err := c.waitServing(ctx, m); err != nil {
		m.stop(syscall.SIGKILL, 0)
		return err
	}
	return nil
}

// Running reports whether the process of member i is alive. A running
// member does not necessarily serve clients; see Mode.
func (c *Cluster) Running(i int) bool {
	if c.member(i) == nil {
		return c.emb.Running()
	}
	return c.member(i).running()
}

// Mode returns the mode that member i reports in its srvr answer:
// "standalone", "leader" or "follower". It returns an error if the member
// cannot be reached or does not currently serve clients.
func (c *Cluster) Mode(ctx context.Context, i int) (string, error) {
	if c.member(i) == nil {
		return c.embMode(ctx)
	}
	return c.member(i).mode(ctx)
}

// Leader returns the index of the member that reports itself the leader
// (see Mode), asking each running member in turn. It returns an error when
// none does: a standalone or embedded server, an election under way,
// members that do not answer. Wrap it in Eventually to wait for an
// election.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	var errs []error
	for i := range c.Addrs() {
		if !c.Running(i) {
			continue
		}
		mode, err := c.Mode(ctx, i)
		if err == nil && mode == "leader" {
			return i, nil
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("member %d: %w", i, err))
		}
	}
	return -1, fmt.Errorf("zktest: no member is the leader: %w", errors.Join(errs...))
}

// Close kills every member, waits for the processes to exit and removes
// the temporary directories. It leaves no goroutine behind, may be called
// more than once, and returns the same result each time.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		if c.emb != nil {
			c.emb.Close()
			return
		}
		var errs []error
		c.mu.Lock()
		members, keep := c.members, c.keep
		c.mu.Unlock()
		for _, m := range members {
			errs = append(errs, m.stop(syscall.SIGKILL, 0))
		}
		if !keep {
			if err := os.RemoveAll(c.dir); err != nil {
				errs = append(errs, fmt.Errorf("zktest: %w", err))
			}
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// defaultStartTimeout bounds Start and Restart when their context has no
// deadline: 90 seconds, scaled (see Bound).
func defaultStartTimeout() time.Duration { return Bound(90 * time.Second) }

// withDefaultTimeout bounds ctx by defaultStartTimeout unless it has a
// deadline already.
func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, defaultStartTimeout())
}
