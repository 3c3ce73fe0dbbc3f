package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes/internal/bench"
)

// benchFlags are zkr bench's options.
type benchFlags struct {
	clients      string
	recipes      string
	acquisitions int
	json         bool
	chain        bool
	rounds       int
}

func (a *app) newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure lock throughput and handoff latency against contenders",
		Long: `For each number of contending sessions in --clients, have them take and release
one lock in a loop, with each recipe in --recipes:

  zkrecipes          zkrecipes' Mutex WithoutGrants: Unlock, then Lock (each holder lists)
  zkrecipes-requeue  the same with Mutex.Requeue: release and queue again in one write
  zkrecipes-grant    zkrecipes' Mutex taking grants (WithGrants; by default the same
                     once a session has waited): each release hands the lock to
                     the next session, which holds without a read
  zkrecipes-grant-requeue
                     the same, with Requeue
  floor              the least a handoff can cost on this server: a chain of sessions
                     queued in advance, each deleting its node when its
                     predecessor's goes (one delete and one event per handoff,
                     no reads)
  floor+listing      the same chain, each session listing the lock's children
                     once before its delete: the one read a safe handoff needs

With --chain, each run is a chain on the floor's terms instead of a loop: the
sessions queue in advance, then each releases as soon as it holds and none queues
again, so HANDOFF is the time from one release to the next holder, comparable
with the floor's (the loop's also pays each session's next create). A chain
needs at least two clients; the -requeue workloads cannot run as one.

Before a loop's timed part, each session takes and releases the lock once: its
first Lock on a new path pays once for the path's parents (and, with grants, its
grants directory), which later ones reuse.

The table shows acquisitions per second, the time per handoff, the 50th and 99th
percentile of the wait for the lock, the requests and watch events per
acquisition as the clients counted them ("n/a" where the recipe cannot be
observed), and the reads and writes per acquisition as the servers counted them
during the timed part (SRV READS, SRV WRITES: the sum of zk_cnt_readlatency and
zk_cnt_updatelatency in every server's mntr; "n/a" unless every server answers
mntr with them, ZooKeeper 3.6 or later with mntr in 4lw.commands.whitelist).
The servers count every client's requests, so run it where nothing else uses
them; a chain's counts are of its timed part: a round of n sessions makes n
releases and n-1 handoffs, and each session's queueing comes before.

It runs on the servers of --servers (or $ZKR_SERVERS), which it needs; the
server must accept as many connections from this host as there are clients
(maxClientCnxns). The workloads connect in plain text without credentials:
--tls-ca, --tls-cert, --tls-key, --auth, --sasl-user and --kerberos-principal
are refused. The same workloads on a throwaway ZooKeeper, side by side with
go-zookeeper/zk's Lock, are the Go benchmarks of internal/gozk in a checkout of
the repository.`,
		Example: `  zkr bench --servers zk1:2181,zk2:2181,zk3:2181
  zkr bench --servers localhost:2181 --clients 1,10,100 --recipes zkrecipes,floor
  zkr bench --servers localhost:2181 --chain --clients 10,500
  zkr bench --servers localhost:2181 --rounds 4 --acquisitions 2000 --clients 10
  zkr bench --servers zk1:2181,zk2:2181,zk3:2181 --json > bench.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.bench(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.clients, "clients", "1,10,100,500", "comma-separated numbers of contending sessions")
	fl.StringVar(&f.recipes, "recipes", "zkrecipes,zkrecipes-requeue,floor", "comma-separated workloads: zkrecipes (Unlock, then Lock), zkrecipes-requeue (Mutex.Requeue), zkrecipes-grant, zkrecipes-grant-requeue (the same, WithGrants), floor, floor+listing")
	fl.IntVar(&f.acquisitions, "acquisitions", 0, "acquisitions per run (0: 2 per client, at least 200)")
	fl.BoolVar(&f.json, "json", false, "print the results as JSON instead of a table")
	fl.IntVar(&f.rounds, "rounds", 1, "measure each run in this many slices, interleaved with the other recipes' (a server's speed drifts during a run; 4 gives fairer comparisons)")
	fl.BoolVar(&f.chain, "chain", false, "measure handoff time as the floor does (queued in advance, nobody queues again); default clients 10,100,500")
	return cmd
}

// benchReport is what zkr bench --json prints.
type benchReport struct {
	Servers []string       `json:"servers"`
	Runs    []bench.Result `json:"runs"`
}

func (a *app) bench(cmd *cobra.Command, f benchFlags) error {
	if f.chain && !cmd.Flags().Changed("clients") {
		f.clients = "10,100,500"
	}
	ns, err := parseList("clients", f.clients)
	if err != nil {
		return err
	}
	if f.chain && slices.Min(ns) < 2 {
		return usagef("--clients %s: a --chain needs at least 2 clients per run", f.clients)
	}
	var recipes []string
	for r := range strings.SplitSeq(f.recipes, ",") {
		r = strings.TrimSpace(r)
		if !slices.Contains([]string{"zkrecipes", "zkrecipes-requeue", "zkrecipes-grant", "zkrecipes-grant-requeue", "floor", "floor+listing"}, r) {
			return usagef("--recipes: unknown workload %q (want zkrecipes, zkrecipes-requeue, zkrecipes-grant, zkrecipes-grant-requeue, floor or floor+listing)", r)
		}
		if f.chain && strings.HasSuffix(r, "-requeue") {
			if cmd.Flags().Changed("recipes") {
				return usagef("--recipes: %s never releases, so it cannot run as a --chain", r)
			}
			continue
		}
		recipes = append(recipes, r)
	}
	if f.acquisitions < 0 {
		return usagef("--acquisitions %d: must not be negative", f.acquisitions)
	}
	if f.rounds < 1 {
		return usagef("--rounds %d: must be at least 1", f.rounds)
	}

	sigs := catchSignals()
	defer sigs.release()
	ctx, stopSignals := sigs.cancelOn(cmd.Context())
	interrupted := func(err error) error {
		if sig := stopSignals(); sig != nil {
			return signalled(sig, "benchmarking")
		}
		return err
	}
	servers, root, stop, err := a.measureServers(ctx, cmd, false)
	if err != nil {
		return interrupted(err)
	}
	defer stop()

	// Each run is measured in f.rounds slices, interleaved with the other
	// recipes' at the same number of clients.
	order := bench.Interleave(recipes, f.rounds)
	// The servers' request counters, if every one of them reports them.
	requests := bench.ServerRequests(servers)
	if _, err := requests(ctx); err != nil {
		requests = nil
	}
	var cases []benchCase
	for _, n := range ns {
		acq := f.acquisitions
		if acq == 0 {
			acq = max(200, 2*n)
		}
		for _, rec := range order {
			cases = append(cases, benchCase{recipe: rec, clients: n, acquisitions: max(1, acq/f.rounds), chain: f.chain, requests: requests})
		}
	}
	parts, err := a.measure(ctx, cmd, servers, root, cases)
	if err != nil {
		return interrupted(err)
	}
	var results []bench.Result
	for i := 0; i < len(parts); i += len(order) {
		results = append(results, bench.MergeEach(parts[i:i+len(order)], recipes)...)
	}
	stopSignals()
	if f.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(benchReport{Servers: servers, Runs: results})
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENTS\tRECIPE\tACQUISITIONS\tACQ/S\tHANDOFF\tWAIT P50\tWAIT P99\tLISTINGS/ACQ\tREADS/ACQ\tEVENTS/RELEASE\tSRV READS/ACQ\tSRV WRITES/ACQ")
	for _, r := range results {
		name := label(r.Recipe)
		if r.Chain && !strings.HasPrefix(r.Recipe, "floor") {
			name += " (chain)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Contenders, name, r.Acquisitions,
			r.PerSecond, fmtDur(r.Handoff), fmtDur(r.WaitP50), fmtDur(r.WaitP99),
			fmtPer(r.Listings), fmtPer(r.Reads), fmtPer(r.EventsPerRelease),
			fmtPer(r.ServerReads), fmtPer(r.ServerWrites))
	}
	return tw.Flush()
}
