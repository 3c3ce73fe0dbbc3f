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
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// electionFlags are zkr demo election's options.
type electionFlags struct {
	electionConfig
	output
}

// electionConfig is one election scenario.
type electionConfig struct {
	candidates int
	failovers  int
}

// electionSettle is how long the watch events counts must stay still for a
// failover to count as over.
const electionSettle = 50 * time.Millisecond

func (a *app) newElectionCmd() *cobra.Command {
	var f electionFlags
	cmd := &cobra.Command{
		Use:   "election",
		Short: "The leader killed again and again: one watch event per failover with the chain, N-1 when all watch the leader",
		Long: `--candidates candidates, each on a session of its own, campaign for leadership.
The leader is killed (its session closed, which deletes its node at once; a
crash does the same after the session timeout, see zkr demo crash), a new
candidate joins at the back to keep the number, and again, --failovers times.

With zkrecipes' Election each candidate watches the candidate just before it:
a leader's end wakes exactly its successor. With the hand-rolled election every
candidate watches the leader: its end wakes every other candidate, and each
lists the candidates again. The table shows the watch events and listings per
failover, summed over all candidates, and the time from the kill to the new
leader's Campaign returning.`,
		Example: `  zkr demo election
  zkr demo election --candidates 100 --failovers 10 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScenario(a, cmd, &f.output, f.config, runElection)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.candidates, "candidates", 50, "candidates campaigning at once")
	fl.IntVar(&f.failovers, "failovers", 5, "leaders killed, one after the other")
	f.output.flags(cmd, "")
	return cmd
}

// config checks the flags and returns the scenario they describe.
func (f electionFlags) config() (electionConfig, error) {
	switch {
	case f.candidates < 2:
		return f.electionConfig, usagef("--candidates %d: a failover needs at least 2", f.candidates)
	case f.failovers < 1:
		return f.electionConfig, usagef("--failovers %d: must be at least 1", f.failovers)
	}
	return f.electionConfig, f.output.check()
}

// electLabels name the election's two recipes in its table.
var electLabels = recipeLabels{
	ours:  "zkrecipes Election (watch the predecessor)",
	naive: "hand-rolled: all watch the leader (demo only)",
}

// failover is one leader's death and its successor.
type failover struct {
	Events    int64         `json:"watch_events"`
	Listings  int64         `json:"listings"`
	NewLeader time.Duration `json:"new_leader_ns"`
}

// electionRun is one recipe's failovers.
type electionRun struct {
	Recipe    string     `json:"recipe"`
	Failovers []failover `json:"failovers"`
}

// electionReport is what zkr demo election found (--json prints it).
type electionReport struct {
	where
	Candidates int           `json:"candidates"`
	Runs       []electionRun `json:"runs"`
}

// candidate is one participant of either recipe.
type candidate struct {
	c        *zkclient.Client
	campaign func(ctx context.Context) error
	listings func() int64
	watching func() string // the node it watches; nil: not observable
	close    func()
}

func openCandidate(ctx context.Context, env *demoEnv, recipe, dir, id string) (*candidate, error) {
	if recipe == recipeOurs {
		s, err := env.session(ctx, nil, 30*time.Second)
		if err != nil {
			return nil, err
		}
		e := zkrecipes.NewElection(s, dir, id)
		return &candidate{c: s.Client(), campaign: e.Campaign, listings: func() int64 { return s.Stats().Listings },
			close: func() { s.Close() }}, nil
	}
	c, err := env.client(ctx, nil, 30*time.Second)
	if err != nil {
		return nil, err
	}
	e := &herdElection{c: c, dir: dir, id: id}
	return &candidate{c: c, campaign: e.campaign, listings: e.listings.Load, watching: e.watched,
		close: func() { c.Close() }}, nil
}

func runElection(ctx context.Context, env *demoEnv, cfg electionConfig) (*electionReport, error) {
	base := env.path("election")
	p := env.progress(2 * cfg.failovers)
	defer p.finish()
	ctx, stop := p.watchdog(ctx, stallLimit)
	defer stop()
	rep := &electionReport{where: env.where(), Candidates: cfg.candidates}
	for _, recipe := range []string{recipeOurs, recipeNaive} {
		p.run(fmt.Sprintf("%s, candidates=%d", electLabels.of(recipe), cfg.candidates))
		run, err := electionOne(ctx, env, recipe, base+"/"+recipe, cfg, p.step)
		if err != nil {
			return nil, err
		}
		rep.Runs = append(rep.Runs, run)
	}
	return rep, nil
}

// electionOne runs one recipe's failovers on dir.
func electionOne(ctx context.Context, env *demoEnv, recipe, dir string, cfg electionConfig, step func(int)) (electionRun, error) {
	run := electionRun{Recipe: recipe}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type elected struct {
		c  *candidate
		at time.Time
	}
	leaders := make(chan elected, cfg.candidates+cfg.failovers)
	failed := make(chan error, cfg.candidates+cfg.failovers)
	admin, err := env.client(ctx, nil, 30*time.Second)
	if err != nil {
		return run, err
	}
	defer admin.Close()
	var live []*candidate
	defer func() {
		for _, c := range live {
			c.close()
		}
	}()
	next := 0
	// join adds a candidate at the back of the queue.
	join := func() error {
		next++
		c, err := openCandidate(ctx, env, recipe, dir, fmt.Sprintf("c%d", next))
		if err != nil {
			return err
		}
		live = append(live, c)
		go func() {
			if err := c.campaign(ctx); err != nil {
				failed <- err
				return
			}
			leaders <- elected{c, time.Now()}
		}()
		return awaitChildren(ctx, admin, dir, len(live))
	}
	for range cfg.candidates {
		if err := join(); err != nil {
			return run, err
		}
	}
	var leader *candidate
	select {
	case l := <-leaders:
		leader = l.c
	case err := <-failed:
		return run, err
	case <-ctx.Done():
		return run, ctx.Err()
	}
	for range cfg.failovers {
		if err := electionReady(ctx, admin, dir, live, leader); err != nil {
			return run, err
		}
		live = slices.DeleteFunc(live, func(c *candidate) bool { return c == leader })
		events, listings := electionCounts(live)
		t0 := time.Now()
		leader.close()
		var f failover
		select {
		case l := <-leaders:
			leader, f.NewLeader = l.c, l.at.Sub(t0)
		case err := <-failed:
			return run, err
		case <-ctx.Done():
			return run, ctx.Err()
		}
		// Wait for the counts to settle: with every candidate watching
		// the leader, the other events arrive around the new leader's.
		e, l := electionCounts(live)
		for {
			if err := sleepCtx(ctx, electionSettle); err != nil {
				return run, err
			}
			e2, l2 := electionCounts(live)
			if e2 == e && l2 == l {
				break
			}
			e, l = e2, l2
		}
		f.Events, f.Listings = e-events, l-listings
		run.Failovers = append(run.Failovers, f)
		step(0)
		if err := join(); err != nil {
			return run, err
		}
	}
	return run, nil
}

// electionCounts sums the watch events and listings of the candidates.
func electionCounts(cs []*candidate) (events, listings int64) {
	for _, c := range cs {
		events += c.c.Notifications()
		listings += c.listings()
	}
	return events, listings
}

// electionReady waits until every candidate but the leader has set its
// watch: where it can be seen (the hand-rolled candidates say what they
// watch), until each watches the leader's node; otherwise for the counts
// to settle.
func electionReady(ctx context.Context, admin *zkclient.Client, dir string, live []*candidate, leader *candidate) error {
	if leader.watching == nil {
		e, l := electionCounts(live)
		for {
			if err := sleepCtx(ctx, electionSettle); err != nil {
				return err
			}
			e2, l2 := electionCounts(live)
			if e2 == e && l2 == l {
				return nil
			}
			e, l = e2, l2
		}
	}
	kids, _, err := admin.Children(ctx, dir)
	if err != nil {
		return err
	}
	sortSeq(kids)
	for {
		all := true
		for _, c := range live {
			if c != leader && c.watching() != kids[0] {
				all = false
			}
		}
		if all {
			return nil
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return err
		}
	}
}

func (r *electionReport) print(w io.Writer) {
	fmt.Fprintf(w, "Leader election, %d candidates, the leader killed again and again, on %s.\n\n", r.Candidates, r.describe())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECIPE\tCANDIDATES\tFAILOVERS\tEVENTS/FAILOVER\tLISTINGS/FAILOVER\tNEW LEADER P50\tNEW LEADER MAX")
	for _, run := range r.Runs {
		var events, listings float64
		var times []time.Duration
		for _, f := range run.Failovers {
			events += float64(f.Events)
			listings += float64(f.Listings)
			times = append(times, f.NewLeader)
		}
		n := float64(len(run.Failovers))
		var top time.Duration
		if len(times) > 0 {
			top = slices.Max(times)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%s\t%s\n", electLabels.of(run.Recipe), r.Candidates, len(run.Failovers),
			events/n, listings/n, fmtDur(pct(times, 0.5)), fmtDur(top))
	}
	tw.Flush()
	fmt.Fprintf(w, `
EVENTS/FAILOVER: watch events delivered to all candidates when a leader goes:
1 when each watches its predecessor, %d (all the others) when all watch the
leader. LISTINGS/FAILOVER: the candidates' listings that followed. NEW LEADER:
from the kill (its session closed) until the next candidate's Campaign returned.
`, r.Candidates-1)
}
