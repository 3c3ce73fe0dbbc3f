// Package interop builds and runs third-party ZooKeeper recipe
// implementations — Apache Curator (Java) and kazoo (Python) — as separate
// "contender" processes, so tests can check that recipes implemented in this
// module interoperate with them on a real ZooKeeper server. It also builds
// CuratorBench.java, the lock benchmarks' workload on Curator
// ([BuildCuratorBench]; internal/gozk runs it).
//
// Both contenders (CuratorContender.java and kazoo_contender.py, embedded in
// this package) implement the same command line:
//
//	--connect HOST:PORT[,HOST:PORT]  ZooKeeper connect string (required)
//	--path /some/path                recipe path (required); for multilock,
//	                                 comma-separated paths taken in that order
//	--recipe mutex|read|write|latch|semaphore|multilock|member|double-barrier|barrier|barrier-gate
//	                                 recipe to contend on (required)
//	--count N                        acquisitions to perform (required)
//	--hold-ms M                      how long to hold each time (required)
//	--marker DIR                     existing directory shared by all contenders (required)
//	--id ID                          participant id (required)
//	--leases N                       semaphore only (and required there): its leases
//	--session-timeout-ms T           session timeout, default 10000
//	--acquire-timeout-ms T           give up (exit 1) if one acquisition or the
//	                                 start barrier takes longer, default 60000
//	--start-file F                   after READY, wait until F exists before the
//	                                 first acquisition (a start barrier)
//	--stop-file F                    member and barrier-gate only (and required
//	                                 there): leave the group, or remove the
//	                                 barrier, once F exists
//	--members N                      double-barrier only (and required there):
//	                                 its number of participants
//	--node-names curator|stock       kazoo only, default curator; see below
//	--service NAME                   discovery-* only (and required there)
//	--lock-path P                    atomic-long only: PromotedToLock's lock
//	--ttl-ms T                       persistent-ttl-node only (and required there)
//
// The data recipes (counters, queues, service discovery) share the start
// (READY, the start file) and the end (DONE) of the protocol below, and
// print what they took or saw: shared-count and atomic-long (Curator only)
// add one to Curator's SharedCount or DistributedAtomicLong on path, count
// times, trying again until each addition succeeds; queue-offer offers the
// items "<id>-<n>", n from 1 to count, and queue-take takes count items,
// printing "ITEM <data>" for each (Curator: SimpleDistributedQueue; kazoo:
// Queue); locking-queue-offer and locking-queue-take (kazoo only) do the
// same with kazoo's LockingQueue, consuming each item after printing it;
// discovery-register (Curator only) registers the instance --id of
// --service with Curator's ServiceDiscovery on the base path --path
// (address 127.0.0.1, port 9000, payload the String "java-<id>"), prints
// "REGISTERED <id>" and unregisters once the stop file exists;
// discovery-query (Curator only) follows --service with a ServiceCache and
// prints "INSTANCES <id>=<payload>@<address>:<port>,..." (sorted by id) at
// first and after every change, until the stop file exists;
// discovery-provider (Curator only) registers the instance --id (address
// 127.0.0.1, port 9100, payload the Java POJO CuratorContender$Info with
// zone "java" and weight 7), prints "REGISTERED <id>", then follows --service
// through Curator's ServiceProvider and prints "PROVIDER <id>=<payload>,..."
// (its getAllInstances, sorted by id; an Info prints as "Info(zone,weight)")
// at first and after every change, until the stop file exists.
//
// The node recipes (Curator only) keep a node at path until the stop file
// exists: persistent-node an ephemeral PersistentNode (no protection),
// persistent-ttl-node a PersistentTtlNode of --ttl-ms, both with the data
// "<id>". After READY each prints "SESSION <its session id in hex> <its
// password in hex>" (for zktest.ExpireSession), and
// "CREATED" once the node's first create (or its write of a node that was
// there) is done; then, polling every 10ms, it sets the node's data to the
// content of DIR/data whenever that changes, printing "SET <data>" (write
// the file atomically), and prints "SEES <ephemeral owner in hex> <data>"
// ("SEES none" while there is no node) whenever what its client reads at
// path changes. Once the stop file exists it closes the node and prints
// "DONE <id>".
//
// Recipes: mutex is Curator's InterProcessMutex; read and write are the two
// sides of Curator's InterProcessReadWriteLock; latch is Curator's
// LeaderLatch(client, path, id), started, awaited and closed once per
// acquisition; semaphore (Curator only) takes one lease of
// InterProcessSemaphoreV2(client, path, leases) per acquisition; multilock
// (Curator only) takes InterProcessMultiLock(client, paths) of the
// comma-separated --path and, while holding, marks each path as an
// exclusive holder does, in DIR/<the path with '/' replaced by '_'>/; member
// (Curator only) joins the group on path as GroupMember(client, path, id)
// with the id as its payload, prints "MEMBERS id=payload,..." (sorted by id)
// at first and after every change it sees, and leaves once the stop file
// exists, printing "DONE <id>" (--count, --hold-ms and --marker are not
// used); double-barrier (Curator only) passes
// DistributedDoubleBarrier(client, path, members) once (--count is not used):
// it creates DIR/arrived-<id>, enters, prints "ACQ <id> 1", checks that N
// DIR/arrived-* files exist, sleeps hold-ms, creates DIR/leaving-<id>,
// leaves, and checks that N DIR/leaving-* files exist; barrier (Curator only)
// prints "WAITING <id>" if the barrier's node exists ("NOT-SET <id>" if
// not), waits on DistributedBarrier(client, path) and prints "PASSED <id>"
// and "DONE <id>"; barrier-gate (Curator only) sets that barrier, prints
// "SET <id>", and removes it once the stop file exists, printing "DONE <id>"
// (--count, --hold-ms and --marker are not used by either). The kazoo
// contender uses kazoo's Lock, WriteLock and ReadLock
// with extra_lock_patterns ("-lock-"; "__WRIT__" and "__READ__" for writers;
// "__WRIT__" for readers) and, by default, subclasses them so that kazoo's
// own znodes are named like Curator's ("<hex>-lock-<seq>",
// "<hex>-__WRIT__<seq>", "<hex>-__READ__<seq>", "<hex>-latch-<seq>"):
// Curator orders lock children by the text after its lock name, and kazoo's
// stock names ("__lock__", "__rlock__") do not contain it, so Curator would
// order kazoo's znodes by their random prefix and ignore them. The kazoo
// reader also avoids kazoo 2.8.0's read/write deadlock (python-zk/kazoo#649).
// With --node-names stock the kazoo classes are used unchanged, which is not
// Curator compatible, and latch is unsupported.
//
// Protocol: the contender connects and prints "READY <id>"; then N times it
// acquires, prints "ACQ <id> <n>" (n counts from 1), marks the marker
// directory, sleeps hold-ms, removes its mark and releases; finally it prints
// "DONE <id>" and exits with ExitOK. An exclusive holder (mutex, write, latch)
// creates DIR/exclusive with O_CREAT|O_EXCL semantics and then checks that no
// DIR/shared-* file exists; a reader creates DIR/shared-<id>-<n> and then
// checks that DIR/exclusive does not exist; a semaphore holder creates
// DIR/lease-<id>-<n> and then checks that at most N DIR/lease-* files exist.
// Any overlap prints one line
// "VIOLATION <details>" and exits with ExitViolation. Any other failure
// writes a message to stderr and exits with ExitFailure. stdout carries only
// these protocol lines.
package interop

import (
	"context"
	_ "embed" // contender sources
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Exit codes shared by both contenders.
const (
	// ExitOK means all acquisitions completed without overlap.
	ExitOK = 0
	// ExitFailure means a usage error, connection failure, timeout or any
	// other error; details are on stderr.
	ExitFailure = 1
	// ExitViolation means the contender observed an overlapping holder and
	// printed a VIOLATION line.
	ExitViolation = 3
	// ExitUnsupported means the contender cannot run the requested recipe
	// (kazoo with --node-names stock and --recipe latch) and printed
	// an UNSUPPORTED line.
	ExitUnsupported = 4
)

// JavaDir is where Debian installs the Curator, ZooKeeper and dependency jars.
const JavaDir = "/usr/share/java"

// Python is the interpreter used for the kazoo contender: Debian's python3,
// which is where the python3-kazoo package installs kazoo.
const Python = "/usr/bin/python3"

//go:embed CuratorContender.java
var curatorSource []byte

//go:embed CuratorBench.java
var curatorBenchSource []byte

//go:embed kazoo_contender.py
var kazooSource string

// curatorJars is the Curator contender's compile and run classpath. Debian's
// guava.jar already contains the failureaccess classes.
var curatorJars = []string{
	"curator-recipes.jar",
	"curator-framework.jar",
	"curator-client.jar",
	"zookeeper.jar",
	"zookeeper-jute.jar",
	"guava.jar",
	"slf4j-api.jar",
	"slf4j-nop.jar", // silences Curator/ZooKeeper logging
	// Service discovery (libcurator-discovery-java) and its JSON.
	"curator-x-discovery.jar",
	"jackson-databind.jar",
	"jackson-core.jar",
	"jackson-annotations.jar",
}

// curatorInstallHint names the Debian packages providing the Java side.
const curatorInstallHint = "apt-get install default-jdk-headless libcurator-recipes-java libcurator-discovery-java libslf4j-java"

// kazooInstallHint names the Debian packages providing the Python side.
const kazooInstallHint = "apt-get install python3 python3-kazoo"

// kazooCheck verifies that kazoo provides what kazoo_contender.py relies on:
// extra_lock_patterns (kazoo >= 2.7.1) and the per-class node names it
// overrides.
const kazooCheck = `import inspect
from kazoo.client import KazooClient
from kazoo.recipe.lock import Lock, ReadLock, WriteLock
assert "extra_lock_patterns" in inspect.signature(Lock.__init__).parameters, "kazoo too old: no extra_lock_patterns (need >= 2.7.1)"
assert all(hasattr(c, "_NODE_NAME") for c in (Lock, ReadLock, WriteLock)), "unexpected kazoo lock internals"
`

func curatorClasspath() string {
	paths := make([]string, len(curatorJars))
	for i, j := range curatorJars {
		paths[i] = filepath.Join(JavaDir, j)
	}
	return strings.Join(paths, string(os.PathListSeparator))
}

// CuratorAvailable reports whether java, javac and the Curator, ZooKeeper and
// dependency jars under JavaDir are present. A non-nil error lists what is
// missing and which Debian packages to apt-get install
// (default-jdk-headless, libcurator-recipes-java, libcurator-discovery-java,
// libslf4j-java).
func CuratorAvailable() error {
	var missing []string
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, j := range curatorJars {
		if _, err := os.Stat(filepath.Join(JavaDir, j)); err != nil {
			missing = append(missing, filepath.Join(JavaDir, j))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("interop: Curator contender unavailable, missing %s (%s)",
			strings.Join(missing, ", "), curatorInstallHint)
	}
	return nil
}

// KazooAvailable reports whether Python (/usr/bin/python3) can import a kazoo
// with the lock API the kazoo contender needs (kazoo >= 2.7.1). A non-nil
// error says what failed and what to apt-get install (python3-kazoo).
func KazooAvailable() error {
	if _, err := os.Stat(Python); err != nil {
		return fmt.Errorf("interop: kazoo contender unavailable: %v (%s)", err, kazooInstallHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, Python, "-I", "-c", kazooCheck).CombinedOutput()
	if err != nil {
		return fmt.Errorf("interop: kazoo contender unavailable: %s -c <kazoo check>: %v: %s (%s)",
			Python, err, strings.TrimSpace(string(out)), kazooInstallHint)
	}
	return nil
}

// BuildCurator writes CuratorContender.java into dir (typically a test's
// temporary directory), compiles it there with javac and returns a function
// that builds an *exec.Cmd running the contender with the given arguments.
// The returned commands are bound to their own ctx and are killed when it is
// done. Call CuratorAvailable first for a friendlier error.
func BuildCurator(ctx context.Context, dir string) (func(ctx context.Context, args ...string) *exec.Cmd, error) {
	return buildJava(ctx, dir, "CuratorContender", curatorSource,
		"-Xmx128m",
		"-XX:+UseSerialGC",
		"-XX:TieredStopAtLevel=1", // faster start-up for short runs
	)
}

// BuildCuratorBench is BuildCurator for CuratorBench.java, the lock
// benchmarks' workload on Curator's InterProcessMutex (its usage is at
// the top of that file). Its JVM runs with the JIT compiler's defaults, as
// a service's would, and a heap of at most 256 MiB.
func BuildCuratorBench(ctx context.Context, dir string) (func(ctx context.Context, args ...string) *exec.Cmd, error) {
	return buildJava(ctx, dir, "CuratorBench", curatorBenchSource, "-Xmx256m")
}

// buildJava writes the source of the class main into dir, compiles it
// there with Curator's classpath and returns a function that builds a
// command running it, in a JVM started with flags, on the arguments
// given.
func buildJava(ctx context.Context, dir, main string, source []byte, flags ...string) (func(ctx context.Context, args ...string) *exec.Cmd, error) {
	javac, err := exec.LookPath("javac")
	if err != nil {
		return nil, fmt.Errorf("interop: %w (%s)", err, curatorInstallHint)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("interop: %w (%s)", err, curatorInstallHint)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("interop: %w", err)
	}
	src := filepath.Join(dir, main+".java")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return nil, fmt.Errorf("interop: %w", err)
	}
	cp := curatorClasspath()
	out, err := exec.CommandContext(ctx, javac, "-encoding", "UTF-8", "-nowarn",
		"-cp", cp, "-d", dir, src).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("interop: javac %s.java: %v: %s", main, err, strings.TrimSpace(string(out)))
	}
	runCP := dir + string(os.PathListSeparator) + cp
	return func(ctx context.Context, args ...string) *exec.Cmd {
		argv := append(slices.Clip(flags),
			"-XX:-UsePerfData", // no /tmp/hsperfdata file: its warnings would land on stdout
			"-Dzookeeper.sasl.client=false",
			"-cp", runCP,
			main,
		)
		cmd := exec.CommandContext(ctx, java, append(argv, args...)...)
		cmd.WaitDelay = 5 * time.Second
		return cmd
	}, nil
}

// Kazoo returns a command that runs the embedded kazoo_contender.py with
// /usr/bin/python3 in isolated mode (-I, so PYTHON* variables and user site
// packages of other interpreters cannot interfere) and the given arguments.
// The source is passed with -c, so no file needs to exist on disk. The
// command is killed when ctx is done.
func Kazoo(ctx context.Context, args ...string) *exec.Cmd {
	argv := append([]string{"-I", "-c", kazooSource}, args...)
	cmd := exec.CommandContext(ctx, Python, argv...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Args holds the contender command-line options; Argv renders them.
type Args struct {
	Connect          string        // --connect, required
	Path             string        // --path, required
	Recipe           string        // --recipe: "mutex", "read", "write", "latch", "semaphore", "multilock", "member", "double-barrier", "barrier" or "barrier-gate"
	Leases           int           // --leases, for "semaphore"; zero means none given
	Count            int           // --count
	Hold             time.Duration // --hold-ms
	Marker           string        // --marker, an existing directory
	ID               string        // --id, required
	SessionTimeout   time.Duration // --session-timeout-ms; zero means the default (10s)
	AcquireTimeout   time.Duration // --acquire-timeout-ms; zero means the default (60s)
	StartFile        string        // --start-file; empty means start at once
	StopFile         string        // --stop-file, for "member" and "barrier-gate"
	Members          int           // --members, for "double-barrier"; zero means none given
	KazooStockNaming bool          // --node-names stock (kazoo only)
	Service          string        // --service, for "discovery-register", "discovery-query" and "discovery-provider"
	LockPath         string        // --lock-path, for "atomic-long": promote to this lock
	TTL              time.Duration // --ttl-ms, for "persistent-ttl-node"
}

// Argv returns a's command-line arguments in the contenders' format. It
// fails if a required option is empty.
func (a Args) Argv() ([]string, error) {
	if a.Connect == "" || a.Path == "" || a.Recipe == "" || a.Marker == "" || a.ID == "" {
		return nil, errors.New("interop: Args needs Connect, Path, Recipe, Marker and ID")
	}
	argv := []string{
		"--connect", a.Connect,
		"--path", a.Path,
		"--recipe", a.Recipe,
		"--count", strconv.Itoa(a.Count),
		"--hold-ms", strconv.FormatInt(a.Hold.Milliseconds(), 10),
		"--marker", a.Marker,
		"--id", a.ID,
	}
	if a.SessionTimeout > 0 {
		argv = append(argv, "--session-timeout-ms", strconv.FormatInt(a.SessionTimeout.Milliseconds(), 10))
	}
	if a.AcquireTimeout > 0 {
		argv = append(argv, "--acquire-timeout-ms", strconv.FormatInt(a.AcquireTimeout.Milliseconds(), 10))
	}
	if a.StartFile != "" {
		argv = append(argv, "--start-file", a.StartFile)
	}
	if a.StopFile != "" {
		argv = append(argv, "--stop-file", a.StopFile)
	}
	if a.Members > 0 {
		argv = append(argv, "--members", strconv.Itoa(a.Members))
	}
	if a.Leases > 0 {
		argv = append(argv, "--leases", strconv.Itoa(a.Leases))
	}
	if a.KazooStockNaming {
		argv = append(argv, "--node-names", "stock")
	}
	if a.Service != "" {
		argv = append(argv, "--service", a.Service)
	}
	if a.LockPath != "" {
		argv = append(argv, "--lock-path", a.LockPath)
	}
	if a.TTL > 0 {
		argv = append(argv, "--ttl-ms", strconv.FormatInt(a.TTL.Milliseconds(), 10))
	}
	return argv, nil
}
