package main

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot/vg/draw"

	"github.com/zkrecipes/zkrecipes/internal/bench"
)

// herdFlags are zkr demo herd's options (also zkr demo's, herd being the
// default scenario).
type herdFlags struct {
	clients int
	sweep   string
	rounds  int
	output
}

// defaultSweep is the sweep drawn by --plot without --sweep.
const defaultSweep = "10,50,100,200,500"

const herdLong = `Queue --clients sessions on one lock, twice: once with zkrecipes' Mutex, where
each waiter watches only the node just before its own, and once with a naive lock
where every waiter watches the lock's children, so that every change wakes every
waiter (the herd effect). The naive lock is written only for this demonstration
(internal/bench); never use it.

For each, the table shows the watch events delivered to all clients per release
of the lock, the listings of the queue per release, the throughput, and the 50th
and 99th percentile of the time a client waited for the lock. Each client
acquires the lock --rounds times.

Meanwhile a bystander, a client with nothing to do with the lock, reads and
writes a node of its own in a loop (pausing 1ms between requests): its read and
write latencies (50th/99th percentile) during each run show what the lock's
traffic costs every other client of the server. It is measured alone first.

--sweep runs both recipes for each number of clients in a list, and --plot FILE
draws events per release against the number of clients (FILE ending in .svg or
.png; without --sweep the sweep is ` + defaultSweep + `).`

func addHerdFlags(cmd *cobra.Command, f *herdFlags) {
	fl := cmd.Flags()
	fl.IntVar(&f.clients, "clients", 200, "sessions queueing on the lock")
	fl.StringVar(&f.sweep, "sweep", "", "comma-separated numbers of clients to run both recipes with, instead of --clients")
	fl.IntVar(&f.rounds, "rounds", 1, "acquisitions per client")
	f.output.flags(cmd, "draw events per release against clients")
}

func (a *app) newHerdCmd() *cobra.Command {
	var f herdFlags
	cmd := &cobra.Command{
		Use:   "herd",
		Short: "The herd effect: a naive lock against the predecessor-watching one (the default)",
		Long:  herdLong,
		Example: `  zkr demo herd
  zkr demo herd --clients 50
  zkr demo herd --sweep 10,50,100 --plot herd.svg
  zkr demo herd --servers zk1:2181 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.herd(cmd, f)
		},
	}
	addHerdFlags(cmd, &f)
	return cmd
}

// herdConfig is one herd scenario.
type herdConfig struct {
	clients []int // one run of each recipe per number
	rounds  int
}

func (f herdFlags) config(cmd *cobra.Command) (herdConfig, error) {
	ns := []int{f.clients}
	switch {
	case f.sweep != "" && cmd.Flags().Changed("clients"):
		return herdConfig{}, usagef("use --clients or --sweep, not both")
	case f.sweep != "":
		var err error
		if ns, err = parseList("sweep", f.sweep); err != nil {
			return herdConfig{}, err
		}
	case f.plot != "":
		ns, _ = parseList("sweep", defaultSweep)
	}
	for _, n := range ns {
		if n < 2 {
			return herdConfig{}, usagef("%d clients: the herd needs at least 2", n)
		}
	}
	if f.rounds < 1 {
		return herdConfig{}, usagef("--rounds %d: must be at least 1", f.rounds)
	}
	return herdConfig{clients: ns, rounds: f.rounds}, f.check()
}

func (a *app) herd(cmd *cobra.Command, f herdFlags) error {
	config := func() (herdConfig, error) { return f.config(cmd) }
	return runScenario(a, cmd, &f.output, config, runHerd)
}

// herdReport is what zkr demo herd found (--json prints it).
type herdReport struct {
	where
	Rounds int            `json:"rounds"`
	Runs   []bench.Result `json:"runs"`
	// Bystander holds the bystander's latencies during each run, in the
	// order of Runs; BystanderAlone without any lock traffic.
	Bystander      []bystanderStats `json:"bystander"`
	BystanderAlone bystanderStats   `json:"bystander_alone"`
}

// bystanderAlone is how long the bystander is measured on its own.
const bystanderAlone = 300 * time.Millisecond

func runHerd(ctx context.Context, env *demoEnv, cfg herdConfig) (*herdReport, error) {
	by, err := newBystander(ctx, env, env.path("herd-bystander"))
	if err != nil {
		return nil, err
	}
	defer by.close()
	rep := &herdReport{where: env.where(), Rounds: cfg.rounds}
	stop := by.start(ctx)
	sleepCtx(ctx, bystanderAlone)
	rep.BystanderAlone = stop()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	var cases []benchCase
	for _, n := range cfg.clients {
		for _, r := range []string{recipeOurs, recipeNaive} {
			cases = append(cases, benchCase{
				recipe: r, clients: n, acquisitions: n * cfg.rounds,
				around: func(ctx context.Context) func() {
					stop := by.start(ctx)
					return func() { rep.Bystander = append(rep.Bystander, stop()) }
				},
			})
		}
	}
	results, err := env.a.measure(ctx, env.cmd, env.servers, env.root, cases)
	if err != nil {
		return nil, err
	}
	rep.Runs = results
	return rep, nil
}

func (r *herdReport) print(w io.Writer) {
	fmt.Fprintf(w, "The herd effect: clients queue on one lock and each acquires it %d time(s), on %s.\n\n", r.Rounds, r.describe())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECIPE\tCLIENTS\tEVENTS/RELEASE\tLISTINGS/RELEASE\tACQ/S\tWAIT P50\tWAIT P99\tBYSTANDER READ P50/P99\tBYSTANDER WRITE P50/P99")
	for i, run := range r.Runs {
		var b bystanderStats
		if i < len(r.Bystander) {
			b = r.Bystander[i]
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\n", demoLabel(run.Recipe), run.Contenders,
			fmtPer(run.EventsPerRelease), fmtPer(run.ListingsPerRelease), run.PerSecond, fmtDur(run.WaitP50), fmtDur(run.WaitP99),
			fmtPair(b.ReadP50, b.ReadP99), fmtPair(b.WriteP50, b.WriteP99))
	}
	b := r.BystanderAlone
	fmt.Fprintf(tw, "bystander alone, no lock traffic\t\t\t\t\t\t\t%s\t%s\n", fmtPair(b.ReadP50, b.ReadP99), fmtPair(b.WriteP50, b.WriteP99))
	tw.Flush()
	fmt.Fprint(w, `
EVENTS/RELEASE: watch events delivered to all clients per release of the lock.
LISTINGS/RELEASE: listings of the queue per release, counting each client's
first listing on arrival. Watching its predecessor, a release wakes one waiter,
which lists the queue once. Watching the parent, every change wakes every
waiter, and every waiter lists the queue again: the herd.
BYSTANDER: latency of a client doing unrelated reads and writes on the same
server during the run: the herd's listings queue ahead of its requests.
`)
}

// fmtPair shows two latencies as "p50/p99".
func fmtPair(p50, p99 time.Duration) string {
	return fmtDur(p50) + "/" + fmtDur(p99)
}

// demoLabel names the herd's workloads by how their waiters watch.
func demoLabel(recipe string) string {
	switch recipe {
	case recipeOurs:
		return "predecessor watch (zkrecipes Mutex)"
	case recipeNaive:
		return "naive: all watch the parent (demo only)"
	}
	return label(recipe)
}

// plot draws watch events per release against the number of clients, one
// line per recipe.
func (r *herdReport) plot(file string) error {
	ch := newChart("The herd effect: watch events per lock release", "clients queued on one lock", "watch events delivered per release")
	for _, s := range []struct {
		recipe string
		style  series
	}{
		{recipeNaive, naiveStyle},
		{recipeOurs, oursStyle},
	} {
		var xs, ys []float64
		for _, run := range r.Runs {
			if run.Recipe == s.recipe {
				xs = append(xs, float64(run.Contenders))
				ys = append(ys, run.EventsPerRelease)
			}
		}
		if err := ch.line(demoLabel(s.recipe), s.style, xs, ys); err != nil {
			return err
		}
	}
	return ch.save(file)
}

// The demo's colours: zkrecipes blue, the hand-rolled versions red.
var (
	oursStyle  = series{color.RGBA{R: 30, G: 100, B: 200, A: 255}, draw.SquareGlyph{}}
	naiveStyle = series{color.RGBA{R: 200, G: 40, B: 40, A: 255}, draw.CircleGlyph{}}
	otherStyle = series{color.RGBA{R: 90, G: 90, B: 90, A: 255}, draw.TriangleGlyph{}}
)
