package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/faultproxy"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// raceFlags are zkr demo race's options.
type raceFlags struct {
	raceConfig
	output
}

// raceConfig is one race scenario.
type raceConfig struct {
	waiters   int
	gap       time.Duration
	hangAfter time.Duration
}

// raceSpread is how far after the waiter queued the holders' releases
// reach, in gaps: about two thirds of them fall inside the gap.
const raceSpread = 1.5

func (a *app) newRaceCmd() *cobra.Command {
	var f raceFlags
	cmd := &cobra.Command{
		Use:   "race",
		Short: "The gap between listing and watching: a hand-rolled lock hangs, zkrecipes' Mutex does not",
		Long: `A waiter lists the lock's queue, finds the node before its own, and sets a watch
on it. If that node goes away in between, a watch set with exists (without
checking its answer) waits for a creation that never comes: the waiter hangs
forever, and everyone queued behind it. zkrecipes sets the watch with a read that
fails when the node is already gone, and lists again.

Each of --waiters trials, for each recipe, is one holder and one waiter on a lock
of their own. The gap is widened to --gap on purpose: the hand-rolled lock sleeps
that long between listing and watching; zkrecipes' Mutex, which has no such hook,
talks to the server through a fault-injecting proxy that delays every byte by half
the gap, so that its watch, too, reaches the server a gap after its listing. The
holder releases at a moment spread evenly over the first 1.5 gaps after it sees
the waiter's node: about two thirds of the releases fall inside the gap.

The table shows, for each recipe, how many releases fell in the gap (the
predecessor was gone when the watch was set), how many waiters hung, and the
time from a release to the next holder. A waiter counts as hung when it still
waits --hang-after after its predecessor was deleted; nothing would ever wake
it. --plot draws each trial's handoff time against the moment of its release.`,
		Example: `  zkr demo race
  zkr demo race --waiters 50 --gap 20ms --plot race.svg`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScenario(a, cmd, &f.output, f.config, runRace)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.waiters, "waiters", 20, "trials (one holder, one waiter) per recipe")
	fl.DurationVar(&f.gap, "gap", 50*time.Millisecond, "the widened gap between listing the queue and setting the watch")
	fl.DurationVar(&f.hangAfter, "hang-after", time.Second, "a waiter still waiting this long after its predecessor was deleted counts as hung")
	f.output.flags(cmd, "draw each trial's handoff time against its release moment")
	return cmd
}

// config checks the flags and returns the scenario they describe.
func (f raceFlags) config() (raceConfig, error) {
	switch {
	case f.waiters < 1:
		return f.raceConfig, usagef("--waiters %d: must be at least 1", f.waiters)
	case f.gap < time.Millisecond:
		return f.raceConfig, usagef("--gap %v: must be at least 1ms", f.gap)
	case f.hangAfter < 2*f.gap:
		return f.raceConfig, usagef("--hang-after %v: must be at least twice --gap", f.hangAfter)
	}
	return f.raceConfig, f.output.check()
}

// raceTrial is one holder and one waiter.
type raceTrial struct {
	Recipe string `json:"recipe"`
	// Release is when the holder released, after it saw the waiter's node.
	Release time.Duration `json:"release_after_ns"`
	// InGap: the predecessor was gone when the waiter set its watch.
	InGap bool `json:"in_gap"`
	Hung  bool `json:"hung"`
	// Handoff is the time from the release to the waiter holding (0 if it
	// hung).
	Handoff time.Duration `json:"handoff_ns"`
}

// raceRow sums up one recipe's trials.
type raceRow struct {
	Recipe     string        `json:"recipe"`
	Waiters    int           `json:"waiters"`
	InGap      int           `json:"released_in_gap"`
	Hung       int           `json:"hung"`
	HandoffP50 time.Duration `json:"handoff_p50_ns"`
	HandoffMax time.Duration `json:"handoff_max_ns"`
}

// raceReport is what zkr demo race found (--json prints it).
type raceReport struct {
	where
	Gap       time.Duration `json:"gap_ns"`
	HangAfter time.Duration `json:"hang_after_ns"`
	Rows      []raceRow     `json:"rows"`
	Trials    []raceTrial   `json:"trials"`
}

// raceLabels name the race's two recipes in its table.
var raceLabels = recipeLabels{
	ours:  "zkrecipes Mutex (watch set with getData)",
	naive: "hand-rolled: exists watch, answer ignored (demo only)",
}

// raceHolder is the holder of one trial: it holds, tells when the waiter's
// node appears, and releases.
type raceHolder interface {
	appeared(ctx context.Context) error // waits until a second node is queued
	release(ctx context.Context) error
}

// raceWaiter is the waiter of one trial.
type raceWaiter interface {
	lock(ctx context.Context) error
	inGap() bool // after lock: whether the predecessor was gone at the watch
}

func runRace(ctx context.Context, env *demoEnv, cfg raceConfig) (*raceReport, error) {
	// Every byte of zkrecipes' waiters goes through this proxy: half a
	// gap there, half a gap back between the listing and the watch.
	proxy, err := faultproxy.New(env.servers[0])
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	proxy.Delay(cfg.gap / 2)

	base := env.path("race")
	p := env.progress(2 * cfg.waiters)
	defer p.finish()
	p.run(fmt.Sprintf("race: %d trials per recipe, gap %v", cfg.waiters, cfg.gap))
	ctx, stop := p.watchdog(ctx, stallLimit)
	defer stop()

	trials := make([]raceTrial, 2*cfg.waiters)
	err = together(ctx, len(trials), func(ctx context.Context, i int) error {
		recipe, k := recipeOurs, i
		if i >= cfg.waiters {
			recipe, k = recipeNaive, i-cfg.waiters
		}
		release := time.Duration(float64(cfg.gap) * raceSpread * (float64(k) + 0.5) / float64(cfg.waiters))
		path := fmt.Sprintf("%s/%s-%d", base, recipe, k)
		var err error
		trials[i], err = raceOne(ctx, env, cfg, recipe, path, release, proxy.Addr())
		p.step(0)
		return err
	})
	if err != nil {
		return nil, err
	}
	rep := &raceReport{where: env.where(), Gap: cfg.gap, HangAfter: cfg.hangAfter, Trials: trials}
	for _, recipe := range []string{recipeOurs, recipeNaive} {
		row := raceRow{Recipe: recipe}
		var handoffs []time.Duration
		for _, t := range trials {
			if t.Recipe != recipe {
				continue
			}
			row.Waiters++
			if t.InGap {
				row.InGap++
			}
			if t.Hung {
				row.Hung++
			} else {
				handoffs = append(handoffs, t.Handoff)
			}
		}
		if len(handoffs) > 0 {
			row.HandoffP50, row.HandoffMax = pct(handoffs, 0.5), slices.Max(handoffs)
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// raceOne runs one trial on path: the holder locks, the waiter queues, the
// holder releases release after it saw the waiter's node.
func raceOne(ctx context.Context, env *demoEnv, cfg raceConfig, recipe, path string, release time.Duration, proxyAddr string) (raceTrial, error) {
	t := raceTrial{Recipe: recipe, Release: release}
	var (
		holder raceHolder
		waiter raceWaiter
	)
	switch recipe {
	case recipeOurs:
		hs, err := env.session(ctx, nil, 10*time.Second)
		if err != nil {
			return t, err
		}
		defer hs.Close()
		h := &oursRaceHolder{s: hs, m: zkrecipes.NewMutex(hs, path), dir: path}
		if err := h.m.Lock(ctx); err != nil {
			return t, err
		}
		ws, err := env.session(ctx, []string{proxyAddr}, 10*time.Second)
		if err != nil {
			return t, err
		}
		defer ws.Close()
		holder, waiter = h, &oursRaceWaiter{s: ws, m: zkrecipes.NewMutex(ws, path)}
	default:
		hc, err := env.client(ctx, nil, 10*time.Second)
		if err != nil {
			return t, err
		}
		defer hc.Close()
		h := &naiveRaceHolder{l: &racyLock{c: hc, dir: path}}
		if err := h.l.lock(ctx); err != nil {
			return t, err
		}
		wc, err := env.client(ctx, nil, 10*time.Second)
		if err != nil {
			return t, err
		}
		defer wc.Close()
		holder, waiter = h, &naiveRaceWaiter{l: &racyLock{c: wc, dir: path, gap: cfg.gap}}
	}

	wctx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	locked := make(chan time.Time, 1)
	lockErr := make(chan error, 1)
	go func() {
		if err := waiter.lock(wctx); err != nil {
			lockErr <- err
			return
		}
		locked <- time.Now()
	}()
	if err := holder.appeared(ctx); err != nil {
		return t, err
	}
	if err := sleepCtx(ctx, release); err != nil {
		return t, err
	}
	if err := holder.release(ctx); err != nil {
		return t, err
	}
	released := time.Now()
	hang := time.NewTimer(cfg.hangAfter)
	defer hang.Stop()
	select {
	case at := <-locked:
		t.Handoff = at.Sub(released)
		t.InGap = waiter.inGap()
	case err := <-lockErr:
		return t, fmt.Errorf("%s: lock: %w", recipe, err)
	case <-hang.C:
		// The predecessor is gone (its release was confirmed) and nothing
		// woke the waiter: it would wait forever.
		t.Hung, t.InGap = true, waiter.inGap()
		cancelWait()
		<-lockErr
	case <-ctx.Done():
		return t, ctx.Err()
	}
	return t, nil
}

type oursRaceHolder struct {
	s   *zkrecipes.Session
	m   *zkrecipes.Mutex
	dir string
}

func (h *oursRaceHolder) appeared(ctx context.Context) error {
	return awaitSecond(ctx, h.s.Client(), h.dir)
}

func (h *oursRaceHolder) release(ctx context.Context) error { return h.m.Unlock(ctx) }

type oursRaceWaiter struct {
	s      *zkrecipes.Session
	m      *zkrecipes.Mutex
	before zkrecipes.Stats
}

func (w *oursRaceWaiter) lock(ctx context.Context) error {
	w.before = w.s.Stats()
	return w.m.Lock(ctx)
}

// inGap: the Mutex read its predecessor (setting the watch) and got no
// event, so the read found it gone and the Mutex listed again.
func (w *oursRaceWaiter) inGap() bool {
	st := w.s.Stats()
	return st.Reads > w.before.Reads && st.WatchEvents == w.before.WatchEvents
}

type naiveRaceHolder struct{ l *racyLock }

func (h *naiveRaceHolder) appeared(ctx context.Context) error {
	return awaitSecond(ctx, h.l.c, h.l.dir)
}

func (h *naiveRaceHolder) release(context.Context) error { return h.l.unlock() }

type naiveRaceWaiter struct{ l *racyLock }

func (w *naiveRaceWaiter) lock(ctx context.Context) error { return w.l.lock(ctx) }
func (w *naiveRaceWaiter) inGap() bool                    { return w.l.gone.Load() }

// awaitSecond waits until dir has at least two children.
func awaitSecond(ctx context.Context, c *zkclient.Client, dir string) error {
	for {
		kids, _, w, err := c.ChildrenW(ctx, dir)
		if err != nil {
			return err
		}
		if len(kids) >= 2 {
			w.Remove(ctx)
			return nil
		}
		select {
		case <-w.Event():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *raceReport) print(w io.Writer) {
	fmt.Fprintf(w, "The race between listing and watching, the gap widened to %v, on %s.\n\n", r.Gap, r.describe())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECIPE\tWAITERS\tRELEASED IN THE GAP\tHUNG\tHANDOFF P50\tHANDOFF MAX\tHUNG WHEN STILL WAITING AFTER")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", raceLabels.of(row.Recipe), row.Waiters, row.InGap, row.Hung,
			fmtDur(row.HandoffP50), fmtDur(row.HandoffMax), fmtDur(r.HangAfter))
	}
	tw.Flush()
	fmt.Fprintf(w, `
Each waiter queues behind a holder, which releases at a moment spread over the
first %v after it sees the waiter's node. RELEASED IN THE GAP: the predecessor
was gone when the waiter set its watch. HUNG: the waiter still waited %v
after its predecessor was deleted; nothing would ever wake it (and in a real
queue, everyone behind it would wait too). HANDOFF: release to next holder,
for the waiters that got the lock. zkrecipes' waiters run through a proxy
delaying each byte by %v, so their watch also reaches the server a gap
after their listing.
`, time.Duration(float64(r.Gap)*raceSpread), r.HangAfter, r.Gap/2)
}

// plot draws each trial's handoff time against the moment of its release;
// hung waiters are drawn at the hang limit.
func (r *raceReport) plot(file string) error {
	ch := newChart(fmt.Sprintf("The listing/watch race, gap widened to %v", r.Gap),
		"holder's release after the waiter queued (ms)", "release to next holder (ms)")
	for _, s := range []struct {
		recipe string
		hung   bool
		name   string
		style  series
	}{
		{recipeOurs, false, "zkrecipes Mutex: got the lock", oursStyle},
		{recipeNaive, false, "hand-rolled: got the lock", otherStyle},
		{recipeNaive, true, "hand-rolled: hung (drawn at the hang limit)", naiveStyle},
		{recipeOurs, true, "zkrecipes Mutex: hung", naiveStyle},
	} {
		var xs, ys []float64
		for _, t := range r.Trials {
			if t.Recipe != s.recipe || t.Hung != s.hung {
				continue
			}
			xs = append(xs, ms(t.Release))
			if t.Hung {
				ys = append(ys, ms(r.HangAfter))
			} else {
				ys = append(ys, ms(t.Handoff))
			}
		}
		if err := ch.points(s.name, s.style, xs, ys); err != nil {
			return err
		}
	}
	ch.p.Y.Max = ms(r.HangAfter) * 1.5 // room for the legend above the hung
	g := ms(r.Gap)
	if err := ch.dashed("end of the gap", otherStyle.color, []float64{g, g}, []float64{0, ms(r.HangAfter)}); err != nil {
		return err
	}
	return ch.save(file)
}
