package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"
)

// allFlags are zkr demo all's options.
type allFlags struct {
	out   string
	quick bool
	json  bool
}

// allSizes are the sizes zkr demo all runs each scenario with.
type allSizes struct {
	herd     herdConfig
	race     raceConfig
	crash    crashConfig
	watches  watchesConfig
	election electionConfig
	payload  payloadConfig
}

// modestSizes take about 15 seconds in all on the embedded server;
// quickSizes a few seconds, and still show each effect.
var (
	modestSizes = allSizes{
		herd:     herdConfig{clients: []int{10, 50, 100, 200}, rounds: 1},
		race:     raceConfig{waiters: 20, gap: 50 * time.Millisecond, hangAfter: time.Second},
		crash:    crashConfig{timeouts: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, waiters: 3},
		watches:  watchesConfig{changes: 300, interval: time.Millisecond, work: 5 * time.Millisecond},
		election: electionConfig{candidates: 20, failovers: 5},
		payload:  payloadConfig{writes: 100, writers: 4},
	}
	quickSizes = allSizes{
		herd:     herdConfig{clients: []int{5, 20}, rounds: 1},
		race:     raceConfig{waiters: 6, gap: 100 * time.Millisecond, hangAfter: 500 * time.Millisecond},
		crash:    crashConfig{timeouts: []time.Duration{500 * time.Millisecond, time.Second}, waiters: 2},
		watches:  watchesConfig{changes: 40, interval: time.Millisecond, work: 3 * time.Millisecond},
		election: electionConfig{candidates: 5, failovers: 2},
		payload:  payloadConfig{writes: 8, writers: 2},
	}
)

func (a *app) newAllCmd() *cobra.Command {
	var f allFlags
	cmd := &cobra.Command{
		Use:   "all",
		Short: "Run every scenario at modest sizes and write one Markdown report with its plots",
		Long: `Run herd, race, crash, watches, election and payload one after the other, at
modest sizes (about 15 seconds on the embedded server; --quick: a few
seconds, still showing each effect), and write --out/report.md: each scenario's
claim, its table, and its plot (herd.svg, race.svg, crash.svg, watches.svg
beside the report). --json prints every scenario's results as one JSON object
instead of the tables (the report is written either way).`,
		Example: `  zkr demo all
  zkr demo all --out /tmp/zkr-report --servers zk1:2181,zk2:2181,zk3:2181`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.out == "" {
				return usagef("--out: a directory is needed")
			}
			sizes := modestSizes
			if f.quick {
				sizes = quickSizes
			}
			return a.scenario(cmd, func(ctx context.Context, env *demoEnv) error {
				return runAll(ctx, env, f, sizes)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "zkr-demo-report", "directory for report.md and the plots (created if missing)")
	fl.BoolVar(&f.quick, "quick", false, "the smallest sizes that still show each effect")
	fl.BoolVar(&f.json, "json", false, "print the results as one JSON object instead of the tables")
	return cmd
}

// allSection is one scenario of the report.
type allSection struct {
	name  string
	title string
	claim string
	run   func(ctx context.Context) (finding, error)
}

func runAll(ctx context.Context, env *demoEnv, f allFlags, sizes allSizes) error {
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return withCode(exitFailure, fmt.Errorf("--out: %w", err))
	}
	sections := []allSection{
		{"herd", "The herd effect", `"With 500 clients contending for a lock and everyone watching the shared parent path or the current lock-holder directly, every single lock release triggers a notification storm [...] it can generate enough simultaneous read load against the ZooKeeper ensemble to meaningfully degrade its performance for every other client."`,
			func(ctx context.Context) (finding, error) { return runHerd(ctx, env, sizes.herd) }},
		{"race", "The gap between listing and watching", `"If the predecessor znode is deleted in the gap between the client listing the children and setting its watch, the client can miss the deletion notification entirely and wait forever."`,
			func(ctx context.Context) (finding, error) { return runRace(ctx, env, sizes.race) }},
		{"crash", "A holder loses power", `"Client A's machine suddenly loses power. Walk through exactly what happens — which ZNodes get deleted, how does Client B learn about it, and what guarantee does ZooKeeper provide that the lock is released?" The session timeout bounds the release; a fencing token keeps the old holder out.`,
			func(ctx context.Context) (finding, error) { return runCrash(ctx, env, sizes.crash) }},
		{"watches", "One-shot against persistent watches", `"The config changes rapidly 10 times. If the client's notification handler is slow [...] old notifications queue up" with a persistent watch; a one-shot watch re-registered with a read "atomically reads the current state".`,
			func(ctx context.Context) (finding, error) { return runWatches(ctx, env, sizes.watches) }},
		{"election", "Leader election", `"Why watch the previous node instead of the leader? To avoid a herd effect — if all clients watched the leader, a leader crash would notify every client simultaneously."`,
			func(ctx context.Context) (finding, error) { return runElection(ctx, env, sizes.election) }},
		{"payload", "400 KB values", `"A team decides to store user profiles (about 400KB per profile) in ZooKeeper instead of a database. Why is this a bad idea?" The 1 MB limit, and every write broadcast to every member.`,
			func(ctx context.Context) (finding, error) { return runPayload(ctx, env, sizes.payload) }},
	}
	var md bytes.Buffer
	size := "modest sizes"
	if f.quick {
		size = "--quick sizes"
	}
	fmt.Fprintf(&md, "# zkr demo all\n\nEvery claim of the seed documents, reproduced and measured: zkrecipes against the naive or hand-rolled version, in the same run, on %s (%s, %s, %d CPUs, %s).\n",
		env.where().describe(), size, runtime.Version(), runtime.NumCPU(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	results := map[string]finding{}
	for _, s := range sections {
		r, err := s.run(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		results[s.name] = r
		var table bytes.Buffer
		r.print(&table)
		fmt.Fprintf(&md, "\n## %s (`zkr demo %s`)\n\n> %s\n\n```text\n%s```\n", s.title, s.name, s.claim, table.String())
		if p, ok := r.(drawable); ok {
			file := s.name + ".svg"
			if err := p.plot(filepath.Join(f.out, file)); err != nil {
				return fmt.Errorf("%s: plot: %w", s.name, err)
			}
			fmt.Fprintf(&md, "\n![%s](%s)\n", s.title, file)
		}
		if !f.json {
			fmt.Fprintf(env.a.stdout, "== %s ==\n", s.name)
			r.print(env.a.stdout)
			fmt.Fprintln(env.a.stdout)
		}
	}
	file := filepath.Join(f.out, "report.md")
	if err := os.WriteFile(file, md.Bytes(), 0o644); err != nil {
		return withCode(exitFailure, fmt.Errorf("--out: %w", err))
	}
	fmt.Fprintf(env.a.stderr, "%s: wrote %s and its plots\n", env.cmd.CommandPath(), file)
	if f.json {
		enc := json.NewEncoder(env.a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	return nil
}
