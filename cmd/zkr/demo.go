package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes/internal/bench"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// demoFlags are zkr demo's options.
type demoFlags struct {
	clients int
	sweep   string
	rounds  int
	json    bool
	plot    string
}

// defaultSweep is the sweep drawn by --plot without --sweep.
const defaultSweep = "10,50,100,200,500"

func (a *app) newDemoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Measure the herd effect: a naive lock against the predecessor-watching one",
		Long: `Queue --clients sessions on one lock, twice: once with zkrecipes' Mutex, where
each waiter watches only the node just before its own, and once with a naive lock
where every waiter watches the lock's children, so that every change wakes every
waiter (the herd effect). The naive lock is written only for this demonstration
(internal/bench); never use it.

For each, the table shows the watch events delivered to all clients per release
of the lock, the listings of the queue per release, the throughput, and the 50th
and 99th percentile of the time a client waited for the lock. Each client
acquires the lock --rounds times.

--sweep runs both recipes for each number of clients in a list, and --plot FILE
draws events per release against the number of clients (FILE ending in .svg or
.png; without --sweep the sweep is ` + defaultSweep + `).

With --servers (or $ZKR_SERVERS), the demo runs there; the server must accept as
many connections from this host as there are clients (maxClientCnxns). Without
them it runs on zkrecipes' embedded ZooKeeper-compatible server (zkserver,
inside this process: no Java needed), and says so on stderr. The workloads
connect in plain text without credentials: --tls-ca, --tls-cert, --tls-key,
--auth, --sasl-user and --kerberos-principal are refused with --servers and do
not apply without.`,
		Example: `  zkr demo
  zkr demo --clients 50
  zkr demo --sweep 10,50,100 --plot herd.svg
  zkr demo --servers zk1:2181 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.demo(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.clients, "clients", 200, "sessions queueing on the lock")
	fl.StringVar(&f.sweep, "sweep", "", "comma-separated numbers of clients to run both recipes with, instead of --clients")
	fl.IntVar(&f.rounds, "rounds", 1, "acquisitions per client")
	fl.BoolVar(&f.json, "json", false, "print the results as JSON instead of a table")
	fl.StringVar(&f.plot, "plot", "", "draw events per release against clients into this .svg or .png file")
	return cmd
}

// demoReport is what zkr demo --json prints.
type demoReport struct {
	Servers []string       `json:"servers"`
	Rounds  int            `json:"rounds"`
	Runs    []bench.Result `json:"runs"`
}

func (a *app) demo(cmd *cobra.Command, f demoFlags) error {
	ns := []int{f.clients}
	switch {
	case f.sweep != "" && cmd.Flags().Changed("clients"):
		return usagef("use --clients or --sweep, not both")
	case f.sweep != "":
		var err error
		if ns, err = parseList("sweep", f.sweep); err != nil {
			return err
		}
	case f.plot != "":
		ns, _ = parseList("sweep", defaultSweep)
	}
	for _, n := range ns {
		if n < 2 {
			return usagef("%d clients: the herd needs at least 2", n)
		}
	}
	if f.rounds < 1 {
		return usagef("--rounds %d: must be at least 1", f.rounds)
	}
	if f.plot != "" {
		if err := checkPlotFile(f.plot); err != nil {
			return err
		}
	}

	sigs := catchSignals()
	defer sigs.release()
	ctx, stopSignals := sigs.cancelOn(cmd.Context())
	interrupted := func(err error) error {
		if sig := stopSignals(); sig != nil {
			return signalled(sig, "running the demo")
		}
		return err
	}
	servers, root, stop, err := a.measureServers(ctx, cmd, true, zktest.Options{})
	if err != nil {
		return interrupted(err)
	}
	defer stop()

	var cases []benchCase
	for _, n := range ns {
		for _, r := range []string{"zkrecipes", "naive"} {
			cases = append(cases, benchCase{recipe: r, clients: n, acquisitions: n * f.rounds})
		}
	}
	results, err := a.measure(ctx, cmd, servers, root, cases)
	if err != nil {
		return interrupted(err)
	}
	stopSignals()
	if f.plot != "" {
		if err := plotHerd(f.plot, results); err != nil {
			return withCode(exitFailure, fmt.Errorf("--plot: %w", err))
		}
		fmt.Fprintf(a.stderr, "%s: wrote %s\n", cmd.CommandPath(), f.plot)
	}
	if f.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(demoReport{Servers: servers, Rounds: f.rounds, Runs: results})
	}
	printDemo(a, results, f.rounds)
	return nil
}

// checkPlotFile refuses a plot file zkr cannot write, before any run.
func checkPlotFile(name string) error {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".svg", ".png":
	default:
		return usagef("--plot %q: the file name must end in .svg or .png", name)
	}
	return nil
}

func printDemo(a *app, results []bench.Result, rounds int) {
	w := a.stdout
	fmt.Fprintf(w, "The herd effect: clients queue on one lock and each acquires it %d time(s).\n\n", rounds)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECIPE\tCLIENTS\tEVENTS/RELEASE\tLISTINGS/RELEASE\tACQ/S\tWAIT P50\tWAIT P99")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.0f\t%s\t%s\n", demoLabel(r.Recipe), r.Contenders,
			fmtPer(r.EventsPerRelease), fmtPer(r.ListingsPerRelease), r.PerSecond, fmtDur(r.WaitP50), fmtDur(r.WaitP99))
	}
	tw.Flush()
	fmt.Fprint(w, `
EVENTS/RELEASE: watch events delivered to all clients per release of the lock.
LISTINGS/RELEASE: listings of the queue per release, counting each client's
first listing on arrival. Watching its predecessor, a release wakes one waiter,
which lists the queue once. Watching the parent, every change wakes every
waiter, and every waiter lists the queue again: the herd.
`)
}

// demoLabel names the demo's workloads by how their waiters watch.
func demoLabel(recipe string) string {
	switch recipe {
	case "zkrecipes":
		return "predecessor watch (zkrecipes Mutex)"
	case "naive":
		return "naive: all watch the parent (demo only)"
	}
	return label(recipe)
}
