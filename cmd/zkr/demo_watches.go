package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// watchesFlags are zkr demo watches' options.
type watchesFlags struct {
	watchesConfig
	output
}

// watchesConfig is one watches scenario.
type watchesConfig struct {
	changes  int
	interval time.Duration
	work     time.Duration
}

func (a *app) newWatchesCmd() *cobra.Command {
	var f watchesFlags
	cmd := &cobra.Command{
		Use:   "watches",
		Short: "A node changed rapidly under a slow watcher: one-shot watches with a re-read against a persistent watch",
		Long: `A writer sets a node --changes times, one every --interval, to 1, 2, 3...
Two watchers, each on a session of its own, take --work to handle each
notification:

  one-shot    reads the node and sets the next watch in one call (getData with
              a watch), handles what it read, then waits for the watch's event
  persistent  one persistent watch (addWatch, ZooKeeper 3.6+): every change is
              delivered, in order, queued while the watcher is busy; it reads
              the node for each one (ZooKeeper's events carry no data)

The table shows, for each, the notifications it handled, the reads it made, how
many of the values it saw, what it believed the value was when the writer
finished and in the end, how many notifications were still queued then, and how
long it stayed busy after the last write. The one-shot watcher always acts on
the latest state and skips the ones in between; the persistent watcher hears of
every change and works through them long after the writer stopped. --plot draws
the changes made and the notifications each watcher handled over time.`,
		Example: `  zkr demo watches
  zkr demo watches --changes 1000 --work 2ms --plot watches.svg`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScenario(a, cmd, &f.output, f.config, runWatches)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.changes, "changes", 300, "changes the writer makes")
	fl.DurationVar(&f.interval, "interval", time.Millisecond, "the writer's pause between two changes")
	fl.DurationVar(&f.work, "work", 5*time.Millisecond, "how long a watcher takes to handle one notification")
	f.output.flags(cmd, "draw changes made and notifications handled over time")
	return cmd
}

// config checks the flags and returns the scenario they describe.
func (f watchesFlags) config() (watchesConfig, error) {
	switch {
	case f.changes < 1:
		return f.watchesConfig, usagef("--changes %d: must be at least 1", f.changes)
	case f.interval < 0:
		return f.watchesConfig, usagef("--interval %v: must not be negative", f.interval)
	case f.work < 0:
		return f.watchesConfig, usagef("--work %v: must not be negative", f.work)
	}
	return f.watchesConfig, f.output.check()
}

// The two watchers.
const (
	watchOneShot    = "one-shot"
	watchPersistent = "persistent"
)

func watchLabel(w string) string {
	if w == watchOneShot {
		return "one-shot watch + re-read (getData)"
	}
	return "persistent watch (addWatch) + read"
}

// watcherRun is what one watcher did.
type watcherRun struct {
	Watcher    string `json:"watcher"`
	Events     int    `json:"events_handled"`
	Reads      int    `json:"reads"`
	ValuesSeen int    `json:"values_seen"`
	// AtLastWrite is the value the watcher had acted on when the writer
	// finished, Queued the notifications it had not handled yet; Final
	// the value it believed in the end.
	AtLastWrite int `json:"believed_at_last_write"`
	Queued      int `json:"queued_at_last_write"`
	Final       int `json:"believed_at_end"`
	// BusyAfter is how long after the last write it handled its last
	// notification.
	BusyAfter time.Duration `json:"busy_after_last_write_ns"`
	// Handled is when (since the first write) it handled each
	// notification.
	Handled []time.Duration `json:"handled_at_ns"`
}

// watchesReport is what zkr demo watches found (--json prints it).
type watchesReport struct {
	where
	Changes  int           `json:"changes"`
	Interval time.Duration `json:"interval_ns"`
	Work     time.Duration `json:"work_ns"`
	// Writes is when (since the first) each change was made.
	Writes []time.Duration `json:"writes_at_ns"`
	Runs   []watcherRun    `json:"watchers"`
}

// watcher is one of the two watchers while it runs.
type watcher struct {
	c        *zkclient.Client
	path     string
	work     time.Duration
	believed atomic.Int64
	handled  atomic.Int64
	run      watcherRun
	seen     map[int]bool
	start    time.Time
	done     time.Time
}

// act reads the node and spends the work on what it read.
func (w *watcher) act(data []byte) {
	v, _ := strconv.Atoi(string(data))
	w.run.Reads++
	w.seen[v] = true
	time.Sleep(w.work)
	w.believed.Store(int64(v))
}

func (w *watcher) handledOne() {
	w.run.Events++
	w.handled.Add(1)
	w.done = time.Now()
	w.run.Handled = append(w.run.Handled, w.done.Sub(w.start))
}

// oneShot handles the node with getData watches until it read last.
func (w *watcher) oneShot(ctx context.Context, last int) error {
	data, _, watch, err := w.c.GetW(ctx, w.path)
	if err != nil {
		return err
	}
	w.act(data)
	for w.believed.Load() != int64(last) {
		select {
		case <-watch.Event():
		case <-ctx.Done():
			return ctx.Err()
		}
		w.handledOne()
		if data, _, watch, err = w.c.GetW(ctx, w.path); err != nil {
			return err
		}
		w.act(data)
	}
	watch.Remove(ctx)
	return nil
}

// persistent handles the node's changes from pw until it has handled
// changes of them.
func (w *watcher) persistent(ctx context.Context, pw *zkclient.PersistentWatch, changes int, step func(int)) error {
	for w.run.Events < changes {
		ev, err := pw.Next(ctx)
		if err != nil {
			return err
		}
		if ev.Type == zkclient.EventNotWatching {
			return fmt.Errorf("persistent watch on %s ended: %w", w.path, ev.Err)
		}
		w.handledOne()
		data, _, err := w.c.Get(ctx, w.path)
		if err != nil {
			return err
		}
		w.act(data)
		step(0)
	}
	return nil
}

func runWatches(ctx context.Context, env *demoEnv, cfg watchesConfig) (*watchesReport, error) {
	dir := env.path("watches")
	var clients []*zkclient.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range 3 {
		c, err := env.client(ctx, nil, 30*time.Second)
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
	}
	wc := clients[0]
	path := dir + "/value"
	if err := ensureDir(ctx, wc, dir); err != nil {
		return nil, err
	}
	if _, err := wc.Create(ctx, path, []byte("0"), zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll)); err != nil {
		return nil, err
	}
	defer wc.Delete(context.Background(), path, -1)

	p := env.progress(2 * cfg.changes)
	defer p.finish()
	p.run(fmt.Sprintf("watches: %d changes, %v of work per notification", cfg.changes, cfg.work))
	ctx, stop := p.watchdog(ctx, stallLimit)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	newWatcher := func(c *zkclient.Client, name string) *watcher {
		return &watcher{c: c, path: path, work: cfg.work, run: watcherRun{Watcher: name}, seen: map[int]bool{}}
	}
	one, per := newWatcher(clients[1], watchOneShot), newWatcher(clients[2], watchPersistent)
	pw, err := per.c.AddWatch(ctx, path, false)
	if err != nil {
		return nil, err
	}
	defer pw.Remove(context.Background())

	start := time.Now()
	one.start, per.start = start, start
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if errs[0] = one.oneShot(ctx, cfg.changes); errs[0] != nil {
			cancel()
		}
	}()
	go func() {
		defer wg.Done()
		if errs[1] = per.persistent(ctx, pw, cfg.changes, p.step); errs[1] != nil {
			cancel()
		}
	}()

	rep := &watchesReport{where: env.where(), Changes: cfg.changes, Interval: cfg.interval, Work: cfg.work}
	for i := 1; i <= cfg.changes; i++ {
		if _, err := wc.Set(ctx, path, []byte(strconv.Itoa(i)), -1); err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		rep.Writes = append(rep.Writes, time.Since(start))
		p.step(0)
		if i < cfg.changes {
			sleepCtx(ctx, cfg.interval)
		}
	}
	lastWrite := time.Now()
	for _, w := range []*watcher{one, per} {
		w.run.AtLastWrite = int(w.believed.Load())
		w.run.Queued = cfg.changes - int(w.handled.Load())
	}
	// The one-shot watcher hears of only some changes: nothing is queued
	// for it beyond its one watch.
	one.run.Queued = 0
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	for _, w := range []*watcher{one, per} {
		w.run.Final = int(w.believed.Load())
		w.run.ValuesSeen = len(w.seen)
		if w.done.After(lastWrite) {
			w.run.BusyAfter = w.done.Sub(lastWrite)
		}
		rep.Runs = append(rep.Runs, w.run)
	}
	return rep, nil
}

func (r *watchesReport) print(w io.Writer) {
	fmt.Fprintf(w, "A node changed %d times, every %v, under watchers taking %v per notification, on %s.\n\n",
		r.Changes, r.Interval, r.Work, r.describe())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WATCHER\tCHANGES\tNOTIFICATIONS HANDLED\tREADS\tVALUES SEEN\tBELIEVED AT LAST WRITE\tQUEUED THEN\tBELIEVED AT END\tBUSY AFTER LAST WRITE")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", watchLabel(run.Watcher), r.Changes, run.Events, run.Reads,
			run.ValuesSeen, run.AtLastWrite, run.Queued, run.Final, fmtDur(run.BusyAfter))
	}
	tw.Flush()
	fmt.Fprint(w, `
One-shot: each notification is followed by a read that also sets the next
watch, so the watcher acts only on the latest state; the changes in between are
never seen (VALUES SEEN), and it is idle soon after the writer stops.
Persistent: every change is delivered and queued (QUEUED THEN), so the watcher
hears of all of them and keeps working long after the writer stopped; since a
notification carries no data, it reads the node each time and mostly finds the
same latest value. Neither is ever wrong about the end state here; the cost is
what differs. A persistent watch that acted on each notification as news would
be acting on stale news.
`)
}

// plot draws the changes made and the notifications each watcher handled
// over time.
func (r *watchesReport) plot(file string) error {
	ch := newChart(fmt.Sprintf("A slow watcher (%v per notification) under %d rapid changes", r.Work, r.Changes),
		"milliseconds since the first change", "count")
	count := func(at []time.Duration) (xs, ys []float64) {
		xs, ys = []float64{0}, []float64{0}
		for i, t := range at {
			xs = append(xs, ms(t))
			ys = append(ys, float64(i+1))
		}
		return xs, ys
	}
	xs, ys := count(r.Writes)
	if err := ch.steps("changes made", otherStyle, xs, ys); err != nil {
		return err
	}
	for _, run := range r.Runs {
		style := oursStyle
		if run.Watcher == watchPersistent {
			style = naiveStyle
		}
		xs, ys := count(run.Handled)
		if err := ch.steps("notifications handled: "+watchLabel(run.Watcher), style, xs, ys); err != nil {
			return err
		}
	}
	ch.p.Y.Max = float64(r.Changes) * 1.3 // room for the legend
	return ch.save(file)
}
