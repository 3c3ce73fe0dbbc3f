package zktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
)

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 10 * time.Second

// member is one ZooKeeper server process and the files it owns.
type member struct {
	id           int // ZooKeeper's myid, index+1
	dir          string
	dataDir      string
	cfgPath      string
	logPath      string // used when log is nil
	clientPort   int
	peerPort     int
	electionPort int
	securePort   int         // the TLS client port, 0 without Options.TLS
	adminPort    int         // the AdminServer's port, 0 without Options.AdminServer
	jaasPath     string      // the JAAS file, "" without Options.SASLUsers or Kerberos
	krb5Conf     string      // the KDC's krb5.conf, "" without Options.Kerberos
	joiner       bool        // started by AddMember: listed as an observer in its own first config
	log          io.Writer   // shared Options.Log, or nil
	tail         *tailBuffer // the end of what went to log

	mu   sync.Mutex
	pid  int
	done chan struct{} // closed when the process has exited; nil before the first start
	exit error         // the process's wait error, set before done is closed

	// hold keeps a paused member stopped: closed to end the holding
	// goroutine, which closes held when it returns; nil when not paused.
	hold, held chan struct{}
}

func (m *member) addr() string {
	return "127.0.0.1:" + strconv.Itoa(m.clientPort)
}

// spec is m's server line in a dynamic configuration, with role
// ("participant" or "observer") and its client address.
func (m *member) spec(role string) string {
	return fmt.Sprintf("server.%d=127.0.0.1:%d:%d:%s;127.0.0.1:%d", m.id, m.peerPort, m.electionPort, role, m.clientPort)
}

// adminAddr is m's AdminServer address (Options.AdminServer).
func (m *member) adminAddr() string { return "127.0.0.1:" + strconv.Itoa(m.adminPort) }

// javaArgs returns the JVM command line of the member.
func (m *member) javaArgs(j jvm, opts Options) []string {
	jit := "-XX:TieredStopAtLevel=1" // quick start-up
	if opts.Production {
		jit = "-XX:+TieredCompilation"
	}
	args := []string{
		"-Xmx" + opts.Heap,
		"-XX:+UseSerialGC",
		jit,
		"-Xss512k",
		"-XX:-UsePerfData",
		"-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.jmx.log4j.disable=true",
		// Retry leader election at least every second, so that members
		// started at different times find each other quickly.
		"-Dzookeeper.fastleader.maxNotificationInterval=1000",
		// A member that rejoins syncs by snapshot, never by DIFF: in
		// ZooKeeper 3.8.0 a follower that gets missing transactions by
		// DIFF acknowledges one of them and NEWLEADER in a racy order;
		// the leader can take the first for the second ("NEWLEADER ACK
		// from sid ... is from a different epoch") and then waits
		// initLimit for a quorum that does not form, in one epoch after
		// another (ZOOKEEPER-4394, fixed upstream after 3.8.0).
		// TestLeaderKilledWithFollowerBehind saw it in about one round in
		// five without this.
		"-Dzookeeper.forceSnapshotSync=true",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
	}
	if m.jaasPath != "" {
		args = append(args, "-Djava.security.auth.login.config="+m.jaasPath)
	}
	if m.krb5Conf != "" {
		args = append(args, "-Djava.security.krb5.conf="+m.krb5Conf)
	}
	if opts.Reconfig {
		args = append(args, "-Dzookeeper.DigestAuthenticationProvider.superDigest="+superDigest())
	}
	return append(args,
		"-cp", j.classpath,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain",
		m.cfgPath,
	)
}

// start launches the member's JVM. It fails if the member is running.
func (m *member) start(j jvm, opts Options) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runningLocked() {
		return fmt.Errorf("zktest: member %d is already running", m.id)
	}
	var out io.Writer
	if m.log != nil {
		out = io.MultiWriter(m.log, m.tail)
	} else {
		f, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("zktest: member %d log: %w", m.id, err)
		}
		defer f.Close() // the child has its own descriptor
		out = f
	}
	cmd := exec.Command(j.java, m.javaArgs(j, opts)...)
	cmd.Dir = m.dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("zktest: start member %d: %w", m.id, err)
	}
	done := make(chan struct{})
	m.pid, m.done, m.exit = cmd.Process.Pid, done, nil
	go func() {
		err := cmd.Wait()
		m.mu.Lock()
		m.exit = err
		m.mu.Unlock()
		close(done)
	}()
	return nil
}

// exited returns a channel closed when the current process has exited,
// or nil if the member was never started.
func (m *member) exited() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done
}

func (m *member) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runningLocked()
}

func (m *member) runningLocked() bool {
	if m.done == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// stop sends sig to the member's process group and waits for the process
// to exit; if it has not exited after grace (when grace > 0), it is killed.
// Stopping a member that is not running does nothing.
func (m *member) stop(sig syscall.Signal, grace time.Duration) error {
	m.unhold()
	m.mu.Lock()
	pid, done, running := m.pid, m.done, m.runningLocked()
	m.mu.Unlock()
	if !running {
		return nil
	}
	if err := signalGroup(pid, sig); err != nil {
		return fmt.Errorf("zktest: signal member %d: %w", m.id, err)
	}
	signalGroup(pid, syscall.SIGCONT) // a paused member must run to act on sig
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
			return nil
		case <-t.C:
		}
		if err := signalGroup(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("zktest: kill member %d: %w", m.id, err)
		}
	}
	<-done
	return nil
}

// mode asks the member for its srvr answer and returns its mode.
func (m *member) mode(ctx context.Context) (string, error) {
	st, err := zkadmin.Srvr(ctx, m.addr())
	if err != nil {
		return "", fmt.Errorf("zktest: member %d (%s): %w", m.id, m.addr(), err)
	}
	return st.Mode, nil
}

// errPortTaken marks a member that could not bind one of its ports.
var errPortTaken = errors.New("port already in use")

// failure describes why the member did not come up, quoting its log;
// cause, if not nil, is wrapped.
func (m *member) failure(what string, cause error) error {
	tail, where := m.logTail()
	m.mu.Lock()
	exit := m.exit
	m.mu.Unlock()
	msg := fmt.Sprintf("zktest: member %d (%s) %s", m.id, m.addr(), what)
	if exit != nil {
		msg += " (" + exit.Error() + ")"
	}
	msg += fmt.Sprintf("\n--- end of %s ---\n%s", where, tail)
	return &memberError{msg: msg, cause: cause, portTaken: strings.Contains(tail, "Address already in use")}
}

// memberError is a startup failure of a member. It matches errPortTaken
// when the log shows that a port was taken.
type memberError struct {
	msg       string
	cause     error
	portTaken bool
}

func (e *memberError) Error() string { return e.msg }

func (e *memberError) Unwrap() error { return e.cause }

func (e *memberError) Is(target error) bool { return target == errPortTaken && e.portTaken }

// logTail returns the end of the member's log and where the log is.
func (m *member) logTail() (tail, where string) {
	if m.log != nil {
		return m.tail.String(), "Options.Log"
	}
	return fileTail(m.logPath), m.logPath
}

// signal sends sig to the member's process group if it is running.
func (m *member) signal(sig syscall.Signal) error {
	m.mu.Lock()
	pid, running := m.pid, m.runningLocked()
	m.mu.Unlock()
	if !running {
		return nil
	}
	if err := signalGroup(pid, sig); err != nil {
		return fmt.Errorf("zktest: signal member %d: %w", m.id, err)
	}
	return nil
}

// pause stops the member with SIGSTOP and keeps it stopped until resume or
// stop: every few milliseconds it is stopped again, so that a SIGCONT from
// outside the test (a stall injector that freezes and thaws the whole
// process tree) does not end the pause behind the test's back. Such a
// thaw lets the member run for those few milliseconds at most.
func (m *member) pause() error {
	if err := m.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hold != nil || !m.runningLocked() {
		return nil
	}
	hold, held, pid, done := make(chan struct{}), make(chan struct{}), m.pid, m.done
	m.hold, m.held = hold, held
	go keepStopped(func() { signalGroup(pid, syscall.SIGSTOP) }, hold, done, held)
	return nil
}

// resume ends a pause: the holding goroutine is gone before the SIGCONT.
func (m *member) resume() error {
	m.unhold()
	return m.signal(syscall.SIGCONT)
}

// unhold ends the goroutine that keeps a paused member stopped, if any.
func (m *member) unhold() {
	m.mu.Lock()
	hold, held := m.hold, m.held
	m.hold, m.held = nil, nil
	m.mu.Unlock()
	if hold != nil {
		close(hold)
		<-held
	}
}
