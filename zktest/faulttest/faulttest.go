// Package faulttest runs a user's workload under the fault suite that
// holds zkrecipes itself to its word: several client sessions, each behind
// its own fault-injecting proxies (one per member of a 3-member ensemble of
// real ZooKeeper), while a seeded schedule kills, stalls and cuts things,
// and a checker that judges the recorded history afterwards. It is to
// ZooKeeper faults what net/http/httptest is to HTTP servers: a test calls
// [Run] with a [Workload], a function that takes a [Client] (a
// *zkrecipes.Session, renewed after an expiry, and a recorder) and does
// one pass of the user's work — acquire, use, release — recording what it
// did. Run calls it again and again on every client while the faults
// happen, heals everything, checks the history and fails the test with
// the seed, how to replay it and a timeline around each violation.
//
// The properties checked (names as in [Violation].Property):
//
//   - exclusion: two holdings of one resource that conflict (two
//     exclusive ones, an exclusive and a shared one, more than the permits
//     of a permit resource) never overlap. A holding lasts from
//     [Client.Acquired] to [Client.Released], or to [Client.Lost] if the
//     holder noticed its Lost channel close first: that is the holder's own
//     view, the moment it stops using the resource. The only excuse is a
//     session the server ended while the holder could not know (expired on
//     purpose by the schedule, or, without strict mode, one whose timeout
//     had run out since its last answer), and it no longer holds once
//     the holder had been told by its Lost channel for more than half its
//     session timeout.
//   - token: fencing tokens strictly increase in grant order between
//     holdings that exclude each other.
//   - fence: the decisions recorded for each resource's fence
//     ([Client.WriteFenced], [Client.Wrote]) are those of a fence: a write
//     is accepted exactly when its token is at least the highest accepted.
//   - outside-holding: every recorded write falls inside a holding of its
//     resource by its client (after Acquired, before Released or Lost).
//   - lost: a holder stops writing once its Lost channel closed: no write
//     more than half the session timeout (the strict margin, after which a
//     successor may hold) after the close, while the holder had not
//     noticed it. This is what catches a workload that ignores Lost.
//   - progress: within the progress bound of the heal after the last
//     fault, every client acquires (a grant whose Lost was open) or
//     records an operation ([Client.Op]).
//   - leftover: once every session is closed, no recipe node (an
//     ephemeral node, or one named with a 10-digit sequence number: a
//     lock, lease, candidate or queue item) is left under the run's paths
//     ([Client.Path]).
//   - error: the workload returned only errors of a kind a fault may cause
//     (session expired or closed, connection loss, unconfirmed release or
//     write, lost node, deadline, cancellation; ErrLocked counts as busy),
//     and recorded nothing it could not have (Lost, Released or a write of
//     a resource it never acquired). Return an error of your own to report
//     a broken invariant.
//
// The schedule: the faults come in rounds, each a shuffle of every
// enabled [Fault], so that even the default 20 s span has each kind once;
// the seed fixes every choice (kinds, targets, durations, gaps), and
// targets known only at run time (the leader, the member a holder uses)
// are resolved then. A client fault waits up to 4 s for its client to
// hold something, so faults hit holders.
//
// Cost: a run on an ensemble started by Run takes the ensemble's start (a
// few seconds, up to 30 s on a loaded machine), a warm-up, the schedule
// (45 to 55 s of wall time with every kind on: the first round is always
// complete), the heal and the checks: a minute or more on 2 cores, about
// 2.5 minutes under -race. The ensemble's JVMs take up to 256 MiB each.
//
// FAULTTEST_HISTORY=file writes the whole recorded history of each run
// there, one event a line. See docs/faulttesting.md for a complete
// example and how to replay a seed.
package faulttest

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/nemesis"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var (
	seedFlag     = flag.Uint64("faulttest.seed", 0, "seed of faulttest.Run's fault schedule (default: $FAULTTEST_SEED, else random, printed)")
	durationFlag = flag.Duration("faulttest.duration", 0, "faulttest.Run's span of faults (default: $FAULTTEST_DURATION, else Config.Duration, else 20s)")
)

// DefaultDuration is the span of faults of a Config without one: one
// round of every fault kind.
const DefaultDuration = 20 * time.Second

// Fault is a kind of fault the schedule can choose.
type Fault int

// The faults. Member faults act on a ZooKeeper process, client faults on
// the proxies between one client and the members.
const (
	KillMember      Fault = iota + 1 // SIGKILL a member (the leader, a holder's, or any) and restart it
	PauseMember                      // SIGSTOP a member, up to past the session timeout, then SIGCONT
	LoseQuorum                       // kill or stall two members at once
	CutOff                           // silence every link of a client past its session timeout: the server expires it
	BlackholeLink                    // silence or pause the link a client uses: it moves to another member
	DelayClient                      // delay every byte of a client's links, up to near the strict margin
	CutAfterRequest                  // cut a client's connection right after its next create, delete, multi or getChildren2, forwarded or not
	ForceExpiry                      // expire a client's session on the server on purpose
	SlowThenStall                    // delay a client's links, then stall its member past the session timeout
)

func (f Fault) String() string { return nemesis.FaultKind(f).String() }

// Config configures a Run. The zero value of each field is the default in
// brackets.
type Config struct {
	// Cluster is the ensemble to run on, of 3 members (zktest.StartT with
	// Servers: 3); it may serve several runs, one after the other, whose
	// paths differ. [nil: Run starts one and closes it when the test ends]
	Cluster *zktest.Cluster
	// Seed fixes the schedule. [flag -faulttest.seed, else
	// $FAULTTEST_SEED, else random; always printed]
	Seed uint64
	// Duration is the schedule's estimated span; the first round of every
	// enabled fault is complete whatever it says. [flag
	// -faulttest.duration, else $FAULTTEST_DURATION, else DefaultDuration]
	// The flag and the variable override Duration, to run longer.
	Duration time.Duration
	// Clients is the number of sessions, each behind its own proxies,
	// each running the workload. [4]
	Clients int
	// SessionTimeout is each session's. [3s: above zktest's 1 s sync
	// limit plus the strict margin]
	SessionTimeout time.Duration
	// NonStrict makes the sessions without strict mode. [false: every
	// session is strict (zkrecipes.WithStrict), so a holder's Lost closes
	// on every fault that silences it for half the session timeout, not
	// only at its session's expiry, and the workload's handling of Lost
	// is exercised by most faults]
	NonStrict bool
	// Faults are the enabled kinds. [all]
	Faults []Fault
	// Permits is the number of permits of each resource acquired with
	// AcquiredPermit. [1]
	Permits map[string]int
	// ProgressBound is how soon after the heal every client must act
	// again. [zktest.Bound(30s)]
	ProgressBound time.Duration
}

// Workload is one pass of a user's work on client c: typically acquire a
// recipe on c's Session, use the resource while watching its Lost
// channel, release, recording each step on c. Run calls it again and
// again on every client until the run ends, when ctx ends. An error of a
// kind a fault may cause is recorded and the workload called again (return
// the release's error: an unconfirmed release, whose node stays while the
// session lives, closes the session, and Session makes a new one); any
// other error breaks property "error".
type Workload func(ctx context.Context, c *Client) error

// Report is what a Run found.
type Report struct {
	Seed       uint64
	Violations []Violation
	// Summary is one line: the seed and the run's counts (faults,
	// sessions, expiries, grants, losses, writes, refusals, errors...).
	Summary string
	// Replay is how to run the same schedule again.
	Replay string

	events []nemesis.Event
}

// Failed reports whether the run broke a property.
func (r *Report) Failed() bool { return len(r.Violations) > 0 }

// Explain returns the violations, each of the first max with the
// timeline of the events around it (the faults, the sessions and errors
// of the clients involved, the grants, losses, releases and writes of the
// resource; the holdings involved marked >>).
func (r *Report) Explain(max int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d violations (%s)\n", r.Seed, len(r.Violations), r.Replay)
	for i, v := range r.Violations {
		b.WriteString(v.String() + "\n")
		if i < max {
			b.WriteString(nemesis.Timeline(r.events, v.v, 3*time.Second, 120))
		}
	}
	return b.String()
}

// Violation is one broken property.
type Violation struct {
	Property string        // "exclusion", "token", "fence", "outside-holding", "lost", "progress", "leftover", "error"
	At       time.Duration // since the run began
	Resource string        // "" if none
	Clients  []int
	Message  string

	v nemesis.Violation
}

func (v Violation) String() string {
	return fmt.Sprintf("%s violation at %.3fs: %s", v.Property, v.At.Seconds(), v.Message)
}

// publicProperty names the checker's properties as this package does.
func publicProperty(p string) string {
	switch p {
	case nemesis.PropRegister:
		return "fence"
	case nemesis.PropHarness:
		return "outside-holding"
	case nemesis.PropOrphan:
		return "leftover"
	}
	return p
}

// Run runs workload on cfg.Clients clients of a 3-member ensemble under a
// seeded schedule of faults, then heals everything, waits for every client
// to act again, closes the sessions, looks for nodes left behind and
// checks the history (see the package documentation). It logs the seed and
// the schedule first; on a violation it fails t with the seed, how to
// replay it and the timeline around the first violations; if the run
// could not be carried out (a member that would not restart), it stops
// the test with t.Fatalf. It returns the report either way (nil after
// Fatalf in a testing.TB that returns). It takes about a minute; see the
// package documentation. Where Java or ZooKeeper is missing, starting the
// ensemble skips the test (fails it in CI), as zktest.StartT does.
func Run(t testing.TB, cfg Config, workload Workload) *Report {
	t.Helper()
	seed, span, err := params(cfg)
	if err == nil {
		err = cfg.validate()
	}
	if err != nil {
		t.Fatalf("faulttest: %v", err)
		return nil
	}
	cluster := cfg.Cluster
	if cluster == nil {
		cluster = zktest.StartT(t, zktest.Options{Servers: 3})
	}
	clients := cfg.Clients
	if clients <= 0 {
		clients = 4
	}
	var faults []nemesis.FaultKind
	for _, f := range cfg.Faults {
		faults = append(faults, nemesis.FaultKind(f))
	}
	replay := fmt.Sprintf("replay: go test -run '^%s$' -faulttest.seed=%d, or FAULTTEST_SEED=%d", regexp.QuoteMeta(t.Name()), seed, seed)
	t.Logf("faulttest: seed %d, span %v, %d clients (%s)", seed, span, clients, replay)
	ctx, cancel := context.WithTimeout(t.Context(), span+zktest.Bound(5*time.Minute))
	defer cancel()
	res, err := nemesis.RunUser(ctx, nemesis.Options{
		Cluster:        cluster,
		Base:           fmt.Sprintf("/faulttest/%s/%d-%d", pathSafe(t.Name()), seed, time.Now().UnixNano()),
		Seed:           seed,
		Span:           span,
		Clients:        clients,
		StrictClients:  clients,
		SessionTimeout: cfg.SessionTimeout,
		ProgressBound:  cfg.ProgressBound,
		Faults:         faults,
		Logf:           t.Logf,
	}, nemesis.UserOptions{
		Strict:   !cfg.NonStrict,
		Permits:  cfg.Permits,
		Workload: func(ctx context.Context, u *nemesis.UserClient) error { return workload(ctx, &Client{u: u}) },
	})
	if res == nil {
		t.Fatalf("faulttest: seed %d: %v", seed, err)
		return nil
	}
	if f := os.Getenv("FAULTTEST_HISTORY"); f != "" {
		if err := writeHistory(f, res.Events); err != nil {
			t.Errorf("faulttest: FAULTTEST_HISTORY: %v", err)
		}
	}
	rep := &Report{Seed: seed, Summary: res.Summary, Replay: replay, events: res.Events}
	for _, v := range res.Report.Violations {
		rep.Violations = append(rep.Violations, Violation{Property: publicProperty(v.Property), At: v.At, Resource: v.Res,
			Clients: v.Clients, Message: v.Msg, v: v})
	}
	t.Log(rep.Summary)
	if rep.Failed() {
		t.Errorf("%s\n%s", rep.Summary, rep.Explain(5))
	}
	if err != nil {
		t.Fatalf("faulttest: seed %d: the run could not be carried out: %v (%s)", seed, err, replay)
	}
	return rep
}

// validate names what in cfg cannot be run.
func (cfg Config) validate() error {
	switch {
	case cfg.Clients < 0:
		return fmt.Errorf("Config.Clients %d is negative", cfg.Clients)
	case cfg.SessionTimeout < 0:
		return fmt.Errorf("Config.SessionTimeout %v is negative", cfg.SessionTimeout)
	case cfg.ProgressBound < 0:
		return fmt.Errorf("Config.ProgressBound %v is negative", cfg.ProgressBound)
	}
	for _, f := range cfg.Faults {
		if f < KillMember || f > SlowThenStall {
			return fmt.Errorf("Config.Faults: unknown fault %d", int(f))
		}
	}
	for res, n := range cfg.Permits {
		if n < 1 {
			return fmt.Errorf("Config.Permits[%q] is %d, below 1", res, n)
		}
	}
	return nil
}

// params returns the seed and the span: the flag, else the environment,
// else the config, else a random seed and DefaultDuration.
func params(cfg Config) (uint64, time.Duration, error) {
	seed, span := *seedFlag, *durationFlag
	if seed == 0 {
		if v := os.Getenv("FAULTTEST_SEED"); v != "" {
			var err error
			if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
				return 0, 0, fmt.Errorf("FAULTTEST_SEED=%q: %w", v, err)
			}
		}
	}
	if seed == 0 {
		seed = cfg.Seed
	}
	if seed == 0 {
		seed = 1 + rand.Uint64N(1<<53) // printed; exact as a float too
	}
	if span == 0 {
		if v := os.Getenv("FAULTTEST_DURATION"); v != "" {
			var err error
			if span, err = time.ParseDuration(v); err != nil {
				return 0, 0, fmt.Errorf("FAULTTEST_DURATION=%q: %w", v, err)
			}
		}
	}
	if span == 0 {
		span = cfg.Duration
	}
	if span <= 0 {
		span = DefaultDuration
	}
	return seed, span, nil
}

// writeHistory writes every event of a run to file, one a line
// (FAULTTEST_HISTORY=file), for reading a run at leisure.
func writeHistory(file string, events []nemesis.Event) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, e := range events {
		fmt.Fprintln(w, e)
	}
	return errors.Join(w.Flush(), f.Close())
}

// pathSafe turns a test's name into one path segment.
func pathSafe(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r < ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, name)
}

// Client is one client of a run, given to the workload: its session and
// the recorder of what the workload does. Its methods are safe for
// concurrent use, except Rand. Record a step right after the call that
// made it (Acquired right after Lock returned, Lost as soon as the Lost
// channel is seen closed) and Released before the release call: the
// checker's time line is the order of the records. A client holds a
// resource once at a time: Lost, Released and writes of a resource are
// its latest Acquired's, so holdings at once on one client (read locks
// from two goroutines, say) need resources of distinct names.
type Client struct {
	u *nemesis.UserClient
}

// ID returns the client's number, from 0 to Config.Clients-1.
func (c *Client) ID() int { return c.u.ID() }

// Session returns the client's live session, behind the client's own
// proxies: the same one on every call until it is over (expired, or closed
// after an unconfirmed release), then a new one. It waits until ctx ends
// for one to be made. Recipes made on a session are made again on the
// next: keep them for one pass, or until Session returns another.
func (c *Client) Session(ctx context.Context) (*zkrecipes.Session, error) { return c.u.Session(ctx) }

// Path returns the path of name under the run's own base, unique to the
// run: put the workload's recipes there (the leftover scan looks there).
func (c *Client) Path(name string) string { return c.u.Path(name) }

// Rand returns the client's generator, seeded from the run's seed and the
// client: a workload that draws from it repeats its choices when the seed
// is replayed (their timing still varies). For the workload's goroutine
// only.
func (c *Client) Rand() *rand.Rand { return c.u.Rand() }

// Acquired records an exclusive holding of resource (a Mutex, a write
// lock, a leadership) with its fencing token, and the holding's Lost
// channel, which Run watches (nil if there is none): a holding whose Lost
// is already closed is empty, never used.
func (c *Client) Acquired(resource string, token int64, lost <-chan struct{}) {
	c.u.Acquired(resource, nemesis.Exclusive, token, lost)
}

// AcquiredShared records a shared holding (a read lock) of resource: it
// conflicts only with exclusive ones.
func (c *Client) AcquiredShared(resource string, token int64, lost <-chan struct{}) {
	c.u.Acquired(resource, nemesis.Shared, token, lost)
}

// AcquiredPermit records a permit of resource (a Semaphore lease): at
// most Config.Permits[resource] at once. Permits carry no token.
func (c *Client) AcquiredPermit(resource string, lost <-chan struct{}) {
	c.u.Acquired(resource, nemesis.Permit, 0, lost)
}

// Lost records that the workload noticed the Lost channel of its holding
// of resource closed, and stops using resource now.
func (c *Client) Lost(resource string) { c.u.Lost(resource) }

// Released records that the workload starts releasing its holding of
// resource: call it before the release call (Unlock, Resign, Release).
func (c *Client) Released(resource string) { c.u.Released(resource) }

// WriteFenced offers a write with token to the run's fenced register of
// resource, an in-process stand-in for a store that enforces tokens (one
// per resource, shared by the clients): it accepts the write only if
// token is at least the highest it accepted. The decision is recorded
// under the register's lock and returned.
func (c *Client) WriteFenced(resource string, token int64) bool {
	return c.u.WriteFenced(resource, token)
}

// Wrote records a write to the workload's own fenced store (see package
// fencing): with token, and whether the store accepted it. Call it as soon
// as the store answered: the write is judged at the time it is recorded
// (the fence property takes the decisions in the order they were
// recorded, the lost property the time since Lost closed), so bound each
// store call well below half the session timeout (a context deadline), as
// a holder must anyway to see Lost in time; a call that blocks longer
// shows as a write after Lost, and may show out of order with a
// successor's.
func (c *Client) Wrote(resource string, token int64, accepted bool) {
	c.u.Wrote(resource, token, accepted)
}

// Op records a free-form operation, key=value, shown in the timeline; it
// counts as progress.
func (c *Client) Op(key, value string) { c.u.Op(key, value) }
