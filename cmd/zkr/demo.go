package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// scenarios are zkr demo's subcommands, the default first.
var scenarios = []string{"herd", "race", "crash", "watches", "election", "payload", "all"}

func (a *app) newDemoCmd() *cobra.Command {
	var f herdFlags
	cmd := &cobra.Command{
		Use:   "demo [herd|race|crash|watches|election|payload|all]",
		Short: "Reproduce, and measure, what ZooKeeper recipes get right and hand-rolled ones get wrong",
		Long: `Each scenario runs zkrecipes and the naive or hand-rolled version that people
write, side by side in the same run, and measures the difference:

  herd      (the default) one lock, many waiters: watching the predecessor wakes
            one waiter per release, watching the parent wakes them all, and slows
            an unrelated client down
  race      the gap between listing the queue and setting the watch: a lock that
            does not handle "the predecessor is already gone" hangs forever
  crash     a holder loses power: when the next holder gets the lock against the
            session timeout, which nodes go, who is told, and the fencing token
            refusing the old holder's late write
  watches   a node changed rapidly under a slow watcher: one-shot watches with a
            re-read against a persistent watch
  election  the leader killed again and again: watch events per failover with the
            chain of predecessors, and when every candidate watches the leader
  payload   1 KB against 400 KB values, and the server refusing a value above
            1 MB (jute.maxbuffer)
  all       every scenario at modest sizes, into one Markdown report with plots

Each prints a table (--json for JSON) and shows a progress bar on a terminal;
some draw a plot (--plot FILE.svg or .png). The hand-rolled versions live in
zkr only, written to be shown failing: never use them.

With --servers (or $ZKR_SERVERS) a scenario runs there; the server must accept
as many connections from this host as the scenario opens (maxClientCnxns).
Without them it runs on zkrecipes' embedded ZooKeeper-compatible server
(zkserver, a single node inside this process: no Java needed), and says so on
stderr. The workloads connect in plain text without credentials: --tls-ca,
--tls-cert, --tls-key, --auth, --sasl-user and --kerberos-principal are refused
with --servers and do not apply without.

Without a scenario, zkr demo runs herd, with herd's flags.`,
		Example: `  zkr demo
  zkr demo race
  zkr demo crash --timeouts 2s,4s --plot crash.svg
  zkr demo all --out report
  zkr demo election --servers zk1:2181,zk2:2181,zk3:2181 --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown scenario %q (want one of %s)", args[0], strings.Join(scenarios, ", "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.herd(cmd, f)
		},
	}
	addHerdFlags(cmd, &f)
	cmd.AddCommand(a.newHerdCmd(), a.newRaceCmd(), a.newCrashCmd(), a.newWatchesCmd(),
		a.newElectionCmd(), a.newPayloadCmd(), a.newAllCmd())
	return cmd
}

// Every scenario runs zkrecipes' recipe and the naive or hand-rolled one;
// its report names them so.
const (
	recipeOurs  = "zkrecipes"
	recipeNaive = "naive"
)

// recipeLabels name a scenario's two recipes in its table.
type recipeLabels struct{ ours, naive string }

// of is recipe's label.
func (l recipeLabels) of(recipe string) string {
	if recipe == recipeOurs {
		return l.ours
	}
	return l.naive
}

// output is how a scenario shows its results: --json and --plot.
type output struct {
	json bool
	plot string
}

func (o *output) flags(cmd *cobra.Command, plot string) {
	cmd.Flags().BoolVar(&o.json, "json", false, "print the results as JSON instead of a table")
	if plot != "" {
		cmd.Flags().StringVar(&o.plot, "plot", "", plot+" into this .svg or .png file")
	}
}

// check refuses, before any run, a plot file zkr cannot write.
func (o *output) check() error {
	if o.plot == "" {
		return nil
	}
	return checkPlotFile(o.plot)
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

// finding is what a scenario found: a table for people, JSON for programs,
// and, for some, a plot.
type finding interface {
	print(w io.Writer)
}

// drawable is a report that can draw itself.
type drawable interface {
	finding
	plot(file string) error
}

// emit writes the plot, if asked for, then the table or the JSON.
func (o *output) emit(env *demoEnv, r finding) error {
	if o.plot != "" {
		p, ok := r.(drawable)
		if !ok {
			return fmt.Errorf("%s draws no plot", env.cmd.CommandPath())
		}
		if err := p.plot(o.plot); err != nil {
			return withCode(exitFailure, fmt.Errorf("--plot: %w", err))
		}
		fmt.Fprintf(env.a.stderr, "%s: wrote %s\n", env.cmd.CommandPath(), o.plot)
	}
	if o.json {
		enc := json.NewEncoder(env.a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	r.print(env.a.stdout)
	return nil
}

// demoEnv is where a scenario runs: the servers, and the tool's streams.
type demoEnv struct {
	a       *app
	cmd     *cobra.Command
	servers []string
	root    string // the chroot of the user's servers ("" if none), under which the paths go
	// embedded is set when the scenario runs on the embedded server, a
	// single node.
	embedded bool
}

// where says, in a report, what the scenario ran on.
type where struct {
	Servers  []string `json:"servers"`
	Embedded bool     `json:"embedded"` // on zkr's embedded server, a single node
}

func (env *demoEnv) where() where { return where{Servers: env.servers, Embedded: env.embedded} }

// describe says what the scenario ran on, for a table's heading.
func (w where) describe() string {
	if w.Embedded {
		return "the embedded server (zkserver, one node, in this process)"
	}
	return "ZooKeeper at " + strings.Join(w.Servers, ",")
}

// scenario runs fn on the demo's servers: the user's, or the embedded
// server started for it. The first signal cancels fn's context.
func (a *app) scenario(cmd *cobra.Command, fn func(ctx context.Context, env *demoEnv) error) error {
	sigs := catchSignals()
	defer sigs.release()
	ctx, stopSignals := sigs.cancelOn(cmd.Context())
	interrupted := func(err error) error {
		if sig := stopSignals(); sig != nil {
			return signalled(sig, "running the demo")
		}
		return err
	}
	_, _, chosen, err := a.serverList()
	if err != nil {
		return err
	}
	servers, root, stop, err := a.measureServers(ctx, cmd, true)
	if err != nil {
		return interrupted(err)
	}
	defer stop()
	env := &demoEnv{a: a, cmd: cmd, servers: servers, root: root, embedded: !chosen}
	err = fn(ctx, env)
	var e *exitError
	if err != nil && !errors.As(err, &e) {
		err = withCode(exitFailure, err)
	}
	return interrupted(err)
}

// runScenario is a scenario command's run: config checks its flags and
// says what to run, run runs it on the demo's servers, and what it found is
// printed (and drawn) as o says.
func runScenario[C any, R finding](a *app, cmd *cobra.Command, o *output, config func() (C, error), run func(context.Context, *demoEnv, C) (R, error)) error {
	cfg, err := config()
	if err != nil {
		return err
	}
	return a.scenario(cmd, func(ctx context.Context, env *demoEnv) error {
		r, err := run(ctx, env, cfg)
		if err != nil {
			return err
		}
		return o.emit(env, r)
	})
}

// path returns a fresh path for one run of the scenario named.
func (env *demoEnv) path(name string) string {
	return fmt.Sprintf("%s/zkr-demo/%s-%d", env.root, name, time.Now().UnixNano())
}

// progress starts the progress display of total steps.
func (env *demoEnv) progress(total int) *progress {
	return newProgress(env.a.stderr, env.cmd.CommandPath(), total)
}

// connectTimeout bounds each of a scenario's connections.
const connectTimeout = 30 * time.Second

// session opens a zkrecipes session on servers (the scenario's if nil).
func (env *demoEnv) session(ctx context.Context, servers []string, timeout time.Duration, opts ...zkrecipes.SessionOption) (*zkrecipes.Session, error) {
	return dial(ctx, env, servers, func(ctx context.Context, servers []string) (*zkrecipes.Session, error) {
		return zkrecipes.NewSession(ctx, servers, append([]zkrecipes.SessionOption{zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(timeout))}, opts...)...)
	})
}

// client opens a plain zkclient session on servers (the scenario's if nil).
func (env *demoEnv) client(ctx context.Context, servers []string, timeout time.Duration, opts ...zkclient.Option) (*zkclient.Client, error) {
	return dial(ctx, env, servers, func(ctx context.Context, servers []string) (*zkclient.Client, error) {
		return zkclient.Connect(ctx, servers, append([]zkclient.Option{zkclient.WithSessionTimeout(timeout)}, opts...)...)
	})
}

// dial runs connect on servers (the scenario's if nil), giving it
// connectTimeout, and says where it failed to connect.
func dial[C any](ctx context.Context, env *demoEnv, servers []string, connect func(context.Context, []string) (C, error)) (C, error) {
	if servers == nil {
		servers = env.servers
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	c, err := connect(cctx, servers)
	if err != nil {
		var none C
		return none, fmt.Errorf("connecting to %s: %w", strings.Join(servers, ","), err)
	}
	return c, nil
}

// together runs f(ctx, i) for every i below n at once and waits for them
// all. The first error cancels the others' ctx; together returns it, or
// the error of ctx if ctx ended first.
func together(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(cctx, i); err != nil {
				cancel(err) // the first cause stays
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.Cause(cctx)
}

// ms is a duration in milliseconds, for plots.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// awaitChildren waits until dir exists with at least n children. It polls,
// setting no watch: the callers' clients watch dir in other ways.
func awaitChildren(ctx context.Context, c *zkclient.Client, dir string, n int) error {
	for {
		kids, _, err := c.Children(ctx, dir)
		if err != nil && !errors.Is(err, zkclient.ErrNoNode) {
			return err
		}
		if len(kids) >= n {
			return nil
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return err
		}
	}
}
