package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/faultproxy"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// crashFlags are zkr demo crash's options.
type crashFlags struct {
	timeouts string
	waiters  int
	output
}

// crashConfig is one crash scenario.
type crashConfig struct {
	timeouts []time.Duration
	waiters  int
}

// crashSettle is how long the scenario waits, once the next holder holds,
// for the watch events that the node's deletion caused to arrive.
const crashSettle = 200 * time.Millisecond

func (a *app) newCrashCmd() *cobra.Command {
	var f crashFlags
	cmd := &cobra.Command{
		Use:   "crash",
		Short: "A holder loses power: the next holder after the session timeout, and a fencing token refusing the old holder",
		Long: `Holder A takes a lock and writes to a resource the lock guards; --waiters
waiters queue behind it. Then A "loses power": its traffic is blackholed through
a fault-injecting proxy: no close, no reset, nothing. The server expires A's
session once it has heard nothing for the session timeout and deletes its node;
the waiter watching that node is told, lists the queue and holds.

For each session timeout of --timeouts the table shows when the next holder got
the lock (from the blackhole on), when A itself was told its lock may be gone
(zkrecipes' strict session: half the timeout after the last answered request;
a hand-rolled lock never knows), which nodes were deleted, which waiters were
woken, and what happened to A's late write: the resource is a znode keeping the
highest fencing token it accepted (Mutex.Token), so A's write, carrying its old
token, is refused. The hand-rolled lock (every waiter watches the lock's
children, no token) wakes every waiter and lets the late write overwrite the
new holder's.

The runs for all timeouts and both recipes go at once; the scenario takes about
the longest timeout. --plot draws the time to the next holder against the
session timeout.`,
		Example: `  zkr demo crash
  zkr demo crash --timeouts 1s,5s,10s --waiters 5 --plot crash.svg`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScenario(a, cmd, &f.output, f.config, runCrash)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.timeouts, "timeouts", "2s,4s,8s", "comma-separated session timeouts to ask for")
	fl.IntVar(&f.waiters, "waiters", 3, "waiters queued behind the holder")
	f.output.flags(cmd, "draw the time to the next holder against the session timeout")
	return cmd
}

func (f crashFlags) config() (crashConfig, error) {
	var cfg crashConfig
	for s := range strings.SplitSeq(f.timeouts, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			return cfg, usagef("--timeouts %q: %q is not a positive duration", f.timeouts, s)
		}
		cfg.timeouts = append(cfg.timeouts, d)
	}
	if f.waiters < 1 {
		return cfg, usagef("--waiters %d: must be at least 1", f.waiters)
	}
	cfg.waiters = f.waiters
	return cfg, f.check()
}

// crashLabels name the crash's two recipes in its table.
var crashLabels = recipeLabels{
	ours:  "zkrecipes Mutex",
	naive: "hand-rolled: watch the parent, no token",
}

// crashNode is a node deleted during a run.
type crashNode struct {
	Node  string        `json:"node"`
	Owner string        `json:"owner"` // "A", "W1", ...
	At    time.Duration `json:"at_ns"` // since the blackhole
}

// crashNotice is what one waiter was told until the next holder held.
type crashNotice struct {
	Waiter string `json:"waiter"`
	Node   string `json:"node"`
	Events int64  `json:"watch_events"`
}

// crashRun is one recipe with one session timeout.
type crashRun struct {
	Recipe  string        `json:"recipe"`
	Timeout time.Duration `json:"timeout_ns"` // asked for
	Granted time.Duration `json:"granted_ns"` // granted by the server
	// NextHolder is the time from the blackhole to the next holder.
	NextHolder time.Duration `json:"next_holder_ns"`
	Next       string        `json:"next"` // who it was
	// ToldLost is when the old holder's Lost channel closed (0: never,
	// the hand-rolled lock has none).
	ToldLost   time.Duration `json:"told_lost_ns"`
	HolderNode string        `json:"holder_node"`
	Deleted    []crashNode   `json:"deleted"`
	Notified   []crashNotice `json:"waiters"`
	OldToken   int64         `json:"old_token"`
	NewToken   int64         `json:"new_token"`
	// LateWrite is the fate of the old holder's write after the next
	// holder's: "refused" or "accepted"; Register what the resource held
	// in the end.
	LateWrite string `json:"late_write"`
	Register  string `json:"register"`
}

// crashReport is what zkr demo crash found (--json prints it).
type crashReport struct {
	where
	Waiters int        `json:"waiters"`
	Runs    []crashRun `json:"runs"`
}

func runCrash(ctx context.Context, env *demoEnv, cfg crashConfig) (*crashReport, error) {
	base := env.path("crash")
	type job struct {
		recipe  string
		timeout time.Duration
	}
	var jobs []job
	for _, t := range cfg.timeouts {
		for _, r := range []string{recipeOurs, recipeNaive} {
			jobs = append(jobs, job{r, t})
		}
	}
	p := env.progress(len(jobs))
	defer p.finish()
	p.run(fmt.Sprintf("crash: %d runs at once, the longest %v", len(jobs), slices.Max(cfg.timeouts)))
	ctx, stop := p.watchdog(ctx, stallLimit+slices.Max(cfg.timeouts))
	defer stop()

	runs := make([]crashRun, len(jobs))
	err := together(ctx, len(jobs), func(ctx context.Context, i int) error {
		j := jobs[i]
		path := fmt.Sprintf("%s/%s-%v", base, j.recipe, j.timeout)
		var err error
		runs[i], err = crashOne(ctx, env, j.recipe, path, j.timeout, cfg.waiters)
		p.step(0)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &crashReport{where: env.where(), Waiters: cfg.waiters, Runs: runs}, nil
}

// crashContender is one holder or waiter of a crash run, of either recipe.
type crashContender struct {
	name   string
	c      *zkclient.Client
	lock   func(ctx context.Context) error
	unlock func(ctx context.Context) error
	token  func() int64
	lost   func() <-chan struct{} // nil: never told
	close  func()
}

func openCrashContender(ctx context.Context, env *demoEnv, recipe, name, path string, servers []string, timeout time.Duration) (*crashContender, error) {
	if recipe == recipeOurs {
		s, err := env.session(ctx, servers, timeout, zkrecipes.WithStrict())
		if err != nil {
			return nil, err
		}
		m := zkrecipes.NewMutex(s, path)
		return &crashContender{name: name, c: s.Client(), lock: m.Lock, unlock: m.Unlock, token: m.Token,
			lost: m.Lost, close: func() { s.Close() }}, nil
	}
	c, err := env.client(ctx, servers, timeout)
	if err != nil {
		return nil, err
	}
	l := &herdLock{c: c, dir: path}
	return &crashContender{name: name, c: c, lock: l.lock, unlock: func(context.Context) error { return l.unlock() },
		token: func() int64 { return 0 }, close: func() { c.Close() }}, nil
}

// crashOne runs one recipe with one session timeout on path.
func crashOne(ctx context.Context, env *demoEnv, recipe, path string, timeout time.Duration, waiters int) (crashRun, error) {
	run := crashRun{Recipe: recipe, Timeout: timeout}
	proxy, err := faultproxy.New(env.servers[0])
	if err != nil {
		return run, err
	}
	defer proxy.Close()

	// The observer sees every change below the lock: which nodes go, when.
	obs, err := env.client(ctx, nil, 30*time.Second)
	if err != nil {
		return run, err
	}
	defer obs.Close()
	if err := ensureDir(ctx, obs, path); err != nil {
		return run, err
	}
	deleted, stopWatching, err := watchDeletions(ctx, obs, path)
	if err != nil {
		return run, err
	}
	defer stopWatching()
	reg, err := newRegister(ctx, obs, path+"-register")
	if err != nil {
		return run, err
	}
	defer reg.remove(context.Background())

	// A, the holder, talks to the server only through the proxy.
	holder, err := openCrashContender(ctx, env, recipe, "A", path, []string{proxy.Addr()}, timeout)
	if err != nil {
		return run, err
	}
	defer func() {
		// Let A reconnect to learn that its session is gone, then close.
		proxy.Pass()
		proxy.Cut()
		select {
		case <-holder.c.Done():
		case <-time.After(5 * time.Second):
		}
		holder.close()
	}()
	run.Granted = holder.c.Timeout()
	if err := holder.lock(ctx); err != nil {
		return run, fmt.Errorf("%s: A: lock: %w", recipe, err)
	}
	run.OldToken = holder.token()
	if err := crashWrite(ctx, reg, recipe, run.OldToken, "A"); err != nil {
		return run, err
	}

	// The waiters, each on a session of its own, queue behind A.
	wctx, cancelWaiters := context.WithCancel(ctx)
	defer cancelWaiters()
	type acquired struct {
		w  *crashContender
		at time.Time
	}
	got := make(chan acquired, waiters)
	var ws []*crashContender
	var wwg sync.WaitGroup
	defer wwg.Wait()
	for i := range waiters {
		w, err := openCrashContender(ctx, env, recipe, fmt.Sprintf("W%d", i+1), path, nil, 30*time.Second)
		if err != nil {
			return run, err
		}
		defer w.close()
		ws = append(ws, w)
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			if err := w.lock(wctx); err == nil {
				got <- acquired{w, time.Now()}
			}
		}()
		// One at a time, so that they queue in order.
		if err := awaitChildren(ctx, obs, path, i+2); err != nil {
			return run, err
		}
	}
	// Who owns which node, to name the nodes that go.
	owners := map[int64]string{holder.c.SessionID(): "A"}
	for _, w := range ws {
		owners[w.c.SessionID()] = w.name
	}
	nodes, err := crashOwners(ctx, obs, path, owners)
	if err != nil {
		return run, err
	}
	for node, owner := range nodes {
		if owner == "A" {
			run.HolderNode = node
		}
	}
	// Let the waiters set their watches, then take the counts.
	if err := sleepCtx(ctx, crashSettle); err != nil {
		return run, err
	}
	before := make([]int64, len(ws))
	for i, w := range ws {
		before[i] = w.c.Notifications()
	}
	deleted()

	// Power loss.
	t0 := time.Now()
	proxy.Blackhole()
	var told chan time.Duration
	if holder.lost != nil {
		told = make(chan time.Duration, 1)
		lost := holder.lost()
		go func() {
			select {
			case <-lost:
				told <- time.Since(t0)
			case <-wctx.Done():
			}
		}()
	}
	var next acquired
	select {
	case next = <-got:
	case <-ctx.Done():
		return run, ctx.Err()
	}
	run.NextHolder, run.Next = next.at.Sub(t0), next.w.name
	if err := sleepCtx(ctx, crashSettle); err != nil {
		return run, err
	}
	for i, w := range ws {
		run.Notified = append(run.Notified, crashNotice{Waiter: w.name, Node: nodeOf(nodes, w.name), Events: w.c.Notifications() - before[i]})
	}
	for _, d := range deleted() {
		run.Deleted = append(run.Deleted, crashNode{Node: d.node, Owner: nodes[d.node], At: d.at.Sub(t0)})
	}

	// The next holder writes; then A, paused all along, wakes and writes.
	run.NewToken = next.w.token()
	if err := crashWrite(ctx, reg, recipe, run.NewToken, next.w.name); err != nil {
		return run, err
	}
	if run.LateWrite, err = crashLateWrite(ctx, reg, recipe, run.OldToken); err != nil {
		return run, err
	}
	if _, run.Register, err = reg.read(ctx); err != nil {
		return run, err
	}
	if told != nil {
		// Strict loss detection runs on a timer, at half the timeout: it
		// has fired long before the session expired.
		select {
		case run.ToldLost = <-told:
		case <-time.After(timeout):
		}
	}
	cancelWaiters()
	if err := next.w.unlock(context.Background()); err != nil && ctx.Err() == nil {
		return run, fmt.Errorf("%s: %s: unlock: %w", recipe, next.w.name, err)
	}
	return run, nil
}

// crashWrite writes value to the register as the recipe's holders do:
// with their token (zkrecipes), or without (hand-rolled).
func crashWrite(ctx context.Context, reg *register, recipe string, token int64, value string) error {
	if recipe != recipeOurs {
		return reg.plainWrite(ctx, value)
	}
	ok, have, err := reg.fencedWrite(ctx, token, value)
	if err == nil && !ok {
		err = fmt.Errorf("the register refused %s's token %d (it has %d)", value, token, have)
	}
	return err
}

// crashLateWrite is the old holder's write after its successor's: with its
// token (zkrecipes), or without (hand-rolled). It returns "refused" or
// "accepted".
func crashLateWrite(ctx context.Context, reg *register, recipe string, token int64) (string, error) {
	if recipe != recipeOurs {
		return "accepted", reg.plainWrite(ctx, "A (late)")
	}
	ok, _, err := reg.fencedWrite(ctx, token, "A (late)")
	if err != nil || ok {
		return "accepted", err
	}
	return "refused", nil
}

// deletion is a node deleted, and when it was seen to go.
type deletion struct {
	node string
	at   time.Time
}

// watchDeletions records the children of dir deleted from now on, through
// a persistent recursive watch of c (so c must set no one-shot watch on
// dir: on ZooKeeper 3.8 that would replace it). take returns the
// deletions recorded since its last call; stop removes the watch.
func watchDeletions(ctx context.Context, c *zkclient.Client, dir string) (take func() []deletion, stop func(), err error) {
	pw, err := c.AddWatch(ctx, dir, true)
	if err != nil {
		return nil, nil, err
	}
	var (
		mu   sync.Mutex
		seen []deletion
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			ev, err := pw.Next(context.Background())
			if err != nil {
				return
			}
			if name, ok := strings.CutPrefix(ev.Path, dir+"/"); ok && ev.Type == zkclient.EventNodeDeleted {
				mu.Lock()
				seen = append(seen, deletion{name, time.Now()})
				mu.Unlock()
			}
		}
	}()
	take = func() []deletion {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
	stop = func() {
		pw.Remove(context.Background())
		<-done
	}
	return take, stop, nil
}

// crashOwners names path's children by their owners' names.
func crashOwners(ctx context.Context, c *zkclient.Client, path string, owners map[int64]string) (map[string]string, error) {
	kids, _, err := c.Children(ctx, path)
	if err != nil {
		return nil, err
	}
	nodes := map[string]string{}
	for _, k := range kids {
		st, ok, err := c.Exists(ctx, path+"/"+k)
		if err != nil {
			return nil, err
		}
		if ok {
			nodes[k] = owners[st.EphemeralOwner]
		}
	}
	return nodes, nil
}

func nodeOf(nodes map[string]string, owner string) string {
	for n, o := range nodes {
		if o == owner {
			return n
		}
	}
	return ""
}

// shortNode drops a node name's protected prefix ("_c_<uuid>-").
func shortNode(name string) string {
	if strings.HasPrefix(name, "_c_") && len(name) > 40 {
		return name[40:]
	}
	return name
}

func (r *crashReport) print(w io.Writer) {
	fmt.Fprintf(w, "A holder loses power (its traffic blackholed, no close), %d waiter(s) queued, on %s.\n\n", r.Waiters, r.describe())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIMEOUT\tRECIPE\tNEXT HOLDER AFTER\tOLD HOLDER TOLD AFTER\tNODES DELETED\tWAITERS WOKEN\tOLD HOLDER'S LATE WRITE")
	for _, run := range r.Runs {
		told := "never"
		if run.ToldLost > 0 {
			told = fmtDur(run.ToldLost)
		}
		woken := 0
		for _, n := range run.Notified {
			if n.Events > 0 {
				woken++
			}
		}
		var deleted []string
		for _, d := range run.Deleted {
			deleted = append(deleted, d.Owner+"'s")
		}
		if len(deleted) == 0 {
			deleted = []string{"none"}
		}
		late := run.LateWrite
		if run.Recipe == recipeOurs && run.LateWrite == "refused" {
			late = fmt.Sprintf("refused (token %d < %d)", run.OldToken, run.NewToken)
		} else if run.LateWrite == "accepted" {
			late = "accepted: overwrote " + run.Next + "'s"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d of %d\t%s\n", fmtTimeout(run.Timeout, run.Granted), crashLabels.of(run.Recipe),
			fmtDur(run.NextHolder), told, strings.Join(deleted, ", "), woken, len(run.Notified), late)
	}
	tw.Flush()
	for _, run := range r.Runs {
		if run.Timeout != r.Runs[0].Timeout {
			break
		}
		fmt.Fprintf(w, "\n%s, session timeout %s:\n", crashLabels.of(run.Recipe), fmtDur(run.Granted))
		token := "no token"
		if run.OldToken != 0 {
			token = fmt.Sprintf("token %d", run.OldToken)
		}
		fmt.Fprintf(w, "  0s        A's traffic blackholed; A holds %s (%s) and has written to the resource\n", shortNode(run.HolderNode), token)
		if run.ToldLost > 0 {
			fmt.Fprintf(w, "  %-9s A's Lost() closes: it must stop touching the resource\n", fmtDur(run.ToldLost))
		}
		for _, d := range run.Deleted {
			fmt.Fprintf(w, "  %-9s the server deletes %s (%s's node, with %s's session)\n", fmtDur(d.At), shortNode(d.Node), d.Owner, d.Owner)
		}
		fmt.Fprintf(w, "  %-9s %s holds the lock", fmtDur(run.NextHolder), run.Next)
		if run.NewToken != 0 {
			fmt.Fprintf(w, ", token %d", run.NewToken)
		}
		fmt.Fprintln(w)
		var told []string
		for _, n := range run.Notified {
			told = append(told, fmt.Sprintf("%s (%s) %d", n.Waiter, shortNode(n.Node), n.Events))
		}
		fmt.Fprintf(w, "  watch events per waiter: %s\n", strings.Join(told, ", "))
		fmt.Fprintf(w, "  A's late write: %s; the resource holds %q\n", run.LateWrite, run.Register)
	}
	fmt.Fprint(w, `
NEXT HOLDER AFTER: from the blackhole until a waiter held the lock. The server
deletes A's node when it expires A's session: once it has heard nothing from A
for the session timeout, counted from A's last packet (a ping, sent every third
of the timeout, so up to that much before the blackhole) and checked once per
tick. The recipe makes no difference: only the server can release a dead
holder's lock.
OLD HOLDER TOLD AFTER: when A's Mutex.Lost() closed: A's strict session counts
half the timeout from the send time of its last answered request, so A knows
before the server can have expired it. A hand-rolled lock never knows.
WAITERS WOKEN: waiters that got a watch event for A's node going.
LATE WRITE: A, paused all along, writes after the next holder did: the resource
keeps the highest fencing token it accepted and refuses a lower one.
`)
}

// fmtTimeout shows the session timeout asked for, and what the server
// granted if it differs.
func fmtTimeout(asked, granted time.Duration) string {
	if granted == 0 || granted == asked {
		return fmtDur(asked)
	}
	return fmt.Sprintf("%s (granted %s)", fmtDur(asked), fmtDur(granted))
}

// plot draws the time to the next holder against the session timeout.
func (r *crashReport) plot(file string) error {
	ch := newChart("A holder loses power: when the next holder gets the lock", "session timeout granted (s)", "seconds after the power loss")
	var top float64
	for _, s := range []struct {
		recipe string
		lost   bool
		name   string
		style  series
	}{
		{recipeNaive, false, "next holder (hand-rolled)", naiveStyle},
		{recipeOurs, false, "next holder (zkrecipes Mutex)", oursStyle},
		{recipeOurs, true, "old holder told it may have lost the lock (strict)", otherStyle},
	} {
		var xs, ys []float64
		for _, run := range r.Runs {
			if run.Recipe != s.recipe {
				continue
			}
			y := run.NextHolder
			if s.lost {
				y = run.ToldLost
			}
			xs = append(xs, run.Granted.Seconds())
			ys = append(ys, y.Seconds())
			top = max(top, run.Granted.Seconds())
		}
		if err := ch.line(s.name, s.style, xs, ys); err != nil {
			return err
		}
	}
	if err := ch.dashed("the session timeout", otherStyle.color, []float64{0, top}, []float64{0, top}); err != nil {
		return err
	}
	ch.p.X.Min = 0
	ch.p.Y.Max = top * 1.3 // room for the legend
	return ch.save(file)
}
