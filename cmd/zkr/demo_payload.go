package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
)

// payloadFlags are zkr demo payload's options.
type payloadFlags struct {
	payloadConfig
	output
}

// payloadConfig is one payload scenario.
type payloadConfig struct {
	writes  int // per size
	writers int
}

// payloadSizes are the values compared: a small coordination record and a
// user profile.
var payloadSizes = []int{1 << 10, 400 << 10}

// maxBuffer is ZooKeeper's default jute.maxbuffer, the largest frame a
// server accepts.
const maxBuffer = 1<<20 - 1

// commitLogCount is how many committed transactions a ZooKeeper member
// keeps in memory to bring a follower up to date (zookeeper.commitLogCount,
// 500 by default), values and all.
const commitLogCount = 500

func (a *app) newPayloadCmd() *cobra.Command {
	var f payloadFlags
	cmd := &cobra.Command{
		Use:   "payload",
		Short: "1 KB against 400 KB values: write throughput and bytes replicated, and the refusal above 1 MB",
		Long: `--writers sessions update a node each ("a user profile") --writes times in all,
with 1 KB values and then with 400 KB values. The table shows writes per
second, megabytes per second, the latency of a write, and the bytes that every
write costs the ensemble beyond the client's: the leader sends each write to
every follower, every member appends it to its transaction log before
acknowledging, and keeps it in memory among its last 500 committed transactions
(zookeeper.commitLogCount). Mind that on a server of yours: 500 writes of 400 KB
hold 200 MB of every member's heap (a ZooKeeper with a 256 MB heap ran out of
memory during 300 of them). On the embedded server (one node, in memory) nothing is
replicated or logged: its figures are a single node's, and it says so. On a
ZooKeeper ensemble (--servers naming its members) the figures are the real
ensemble's; the bytes replicated are counted from the members the servers
report (four-letter word srvr, and mntr where allowed).

Then it writes a 1,000,000-byte value (accepted), a 1 MiB value (refused by
the client before sending: the request would exceed jute.maxbuffer, 1,048,575
bytes), and the same with the client's limit raised, to show the server's own
refusal: it closes the connection.`,
		Example: `  zkr demo payload
  zkr demo payload --servers zk1:2181,zk2:2181,zk3:2181 --writes 500`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScenario(a, cmd, &f.output, f.config, runPayload)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.writes, "writes", 100, "writes of each size, in all")
	fl.IntVar(&f.writers, "writers", 4, "sessions writing at once, each to a node of its own")
	f.output.flags(cmd, "")
	return cmd
}

// config checks the flags and returns the scenario they describe.
func (f payloadFlags) config() (payloadConfig, error) {
	switch {
	case f.writers < 1:
		return f.payloadConfig, usagef("--writers %d: must be at least 1", f.writers)
	case f.writes < f.writers:
		return f.payloadConfig, usagef("--writes %d: must be at least --writers (%d)", f.writes, f.writers)
	}
	return f.payloadConfig, f.output.check()
}

// payloadRun is one value size's writes.
type payloadRun struct {
	Size       int           `json:"value_bytes"`
	Writes     int           `json:"writes"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	PerSecond  float64       `json:"writes_per_second"`
	MBPerSec   float64       `json:"mb_per_second"`
	LatencyP50 time.Duration `json:"latency_p50_ns"`
	LatencyP99 time.Duration `json:"latency_p99_ns"`
	// Written is the bytes of values the clients sent; ToFollowers and
	// ToLogs what the ensemble moved and stored for them (estimates: the
	// values times followers, times members; 0 on the embedded server).
	Written     int64 `json:"bytes_written"`
	ToFollowers int64 `json:"bytes_to_followers"`
	ToLogs      int64 `json:"bytes_to_logs"`
	// InCommitLog is what the writes keep in each member's memory besides
	// the nodes themselves: ZooKeeper holds its last commitLogCount
	// committed transactions to bring followers up to date (0 on the
	// embedded server).
	InCommitLog int64 `json:"bytes_in_commit_log"`
}

// payloadAttempt is one write near the size limit.
type payloadAttempt struct {
	Size        int    `json:"value_bytes"`
	ClientLimit int    `json:"client_frame_limit"`
	Result      string `json:"result"`
	Err         string `json:"error,omitempty"`
}

// payloadReport is what zkr demo payload found (--json prints it).
type payloadReport struct {
	where
	// Members is the number of voting members the servers reported (1 on
	// the embedded server and on a standalone ZooKeeper); Ensemble says
	// how it was found.
	Members  int              `json:"members"`
	Ensemble string           `json:"ensemble"`
	Writers  int              `json:"writers"`
	Runs     []payloadRun     `json:"runs"`
	Attempts []payloadAttempt `json:"limit"`
}

func runPayload(ctx context.Context, env *demoEnv, cfg payloadConfig) (*payloadReport, error) {
	rep := &payloadReport{where: env.where(), Writers: cfg.writers, Members: 1, Ensemble: "a single node, in memory"}
	if !env.embedded {
		rep.Members, rep.Ensemble = ensembleSize(ctx, env.servers)
	}
	dir := env.path("payload")
	p := env.progress(cfg.writes*len(payloadSizes) + 3)
	defer p.finish()
	ctx, stop := p.watchdog(ctx, stallLimit)
	defer stop()

	var clients []*zkclient.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range cfg.writers {
		c, err := env.client(ctx, nil, 30*time.Second)
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
	}
	if err := ensureDir(ctx, clients[0], dir); err != nil {
		return nil, err
	}
	for _, size := range payloadSizes {
		p.run(fmt.Sprintf("payload: %d writes of %d bytes", cfg.writes, size))
		r, err := payloadWrites(ctx, clients, dir, size, cfg.writes, p.step)
		if err != nil {
			return nil, err
		}
		followers := int64(max(rep.Members-1, 0))
		if !env.embedded {
			r.ToFollowers, r.ToLogs = r.Written*followers, r.Written*int64(rep.Members)
			r.InCommitLog = int64(min(r.Writes, commitLogCount)) * int64(size)
		}
		rep.Runs = append(rep.Runs, r)
	}
	p.run("payload: values at the 1 MB limit")
	attempts, err := payloadLimit(ctx, env, dir, p.step)
	if err != nil {
		return nil, err
	}
	rep.Attempts = attempts
	return rep, nil
}

// payloadWrites has each client set its own node with values of size, n
// writes in all, and measures them.
func payloadWrites(ctx context.Context, clients []*zkclient.Client, dir string, size, n int, step func(int)) (payloadRun, error) {
	run := payloadRun{Size: size, Writes: n}
	value := make([]byte, size)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	for i, c := range clients {
		p := fmt.Sprintf("%s/profile-%d", dir, i)
		if _, err := c.Create(ctx, p, nil, zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll)); err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
			return run, err
		}
	}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		firstErr  error
		wg        sync.WaitGroup
	)
	start := time.Now()
	for i, c := range clients {
		share := n / len(clients)
		if i < n%len(clients) {
			share++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("%s/profile-%d", dir, i)
			for range share {
				t0 := time.Now()
				_, err := c.Set(ctx, p, value, -1)
				d := time.Since(t0)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				latencies = append(latencies, d)
				mu.Unlock()
				if err != nil {
					return
				}
				step(0)
			}
		}()
	}
	wg.Wait()
	run.Elapsed = time.Since(start)
	for i, c := range clients {
		c.Delete(ctx, fmt.Sprintf("%s/profile-%d", dir, i), -1)
	}
	if firstErr != nil {
		return run, firstErr
	}
	run.Written = int64(n) * int64(size)
	run.PerSecond = float64(n) / run.Elapsed.Seconds()
	run.MBPerSec = float64(run.Written) / 1e6 / run.Elapsed.Seconds()
	run.LatencyP50, run.LatencyP99 = pct(latencies, 0.5), pct(latencies, 0.99)
	return run, nil
}

// payloadLimit writes values at the size limit: one just under, one just
// over with the client's own check, one just over with the check lifted so
// that the server decides.
func payloadLimit(ctx context.Context, env *demoEnv, dir string, step func(int)) ([]payloadAttempt, error) {
	var out []payloadAttempt
	for _, a := range []payloadAttempt{
		{Size: 1_000_000, ClientLimit: maxBuffer},
		{Size: 1 << 20, ClientLimit: maxBuffer},
		{Size: 1 << 20, ClientLimit: 2 << 20},
	} {
		c, err := env.client(ctx, nil, 30*time.Second, zkclient.WithMaxFrame(a.ClientLimit))
		if err != nil {
			return nil, err
		}
		path := fmt.Sprintf("%s/big-%d", dir, len(out))
		_, err = c.Create(ctx, path, make([]byte, a.Size), zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll))
		switch {
		case err == nil:
			a.Result = "accepted"
			c.Delete(ctx, path, -1)
		case errors.Is(err, zkclient.ErrTooLarge):
			a.Result, a.Err = "refused by the client before sending (over jute.maxbuffer)", err.Error()
		case errors.Is(err, zkclient.ErrConnectionLoss):
			a.Result, a.Err = "refused by the server: it closed the connection", err.Error()
			// The session lives on: the client reconnects. Was the node
			// made after all?
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			ok, err := existsAfterLoss(cctx, c, path)
			cancel()
			switch {
			case err != nil:
				a.Result += "; the session did not come back: " + err.Error()
			case ok:
				a.Result += "; yet the node exists"
				c.Delete(ctx, path, -1)
			default:
				a.Result += "; no node made, the session reconnected"
			}
		default:
			a.Result, a.Err = "failed", err.Error()
		}
		c.Close()
		out = append(out, a)
		step(0)
	}
	return out, ctx.Err()
}

// existsAfterLoss asks whether path exists once the client has
// reconnected after a connection loss.
func existsAfterLoss(ctx context.Context, c *zkclient.Client, path string) (bool, error) {
	for {
		if err := c.WaitConnected(ctx); err != nil {
			return false, err
		}
		_, ok, err := c.Exists(ctx, path)
		if !errors.Is(err, zkclient.ErrConnectionLoss) {
			return ok, err
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return false, err
		}
	}
}

// ensembleSize asks the servers how many voting members the ensemble has,
// and says how it knows.
func ensembleSize(ctx context.Context, servers []string) (int, string) {
	modes := map[string]int{}
	synced := -1
	for _, s := range servers {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := zkadmin.Srvr(cctx, s)
		cancel()
		if err != nil {
			modes["unknown"]++
			continue
		}
		modes[st.Mode]++
		if st.Mode == "leader" {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			m, err := zkadmin.Mntr(cctx, s)
			cancel()
			if err == nil {
				if n, err := strconv.Atoi(m["zk_synced_followers"]); err == nil {
					synced = n
				}
			}
		}
	}
	switch {
	case modes["standalone"] > 0:
		return 1, "a standalone ZooKeeper: a single node"
	case synced >= 0:
		return synced + 1, fmt.Sprintf("an ensemble: its leader reports %d synced followers", synced)
	case modes["leader"]+modes["follower"] > 0:
		n := modes["leader"] + modes["follower"]
		return n, fmt.Sprintf("an ensemble: %d of the servers given answered as leader or follower (mntr not allowed: members not listed are not counted)", n)
	}
	return 1, "unknown (the servers do not answer srvr): counted as one node"
}

func (r *payloadReport) print(w io.Writer) {
	fmt.Fprintf(w, "Values of 1 KB against 400 KB, %d writers, on %s", r.Writers, r.describe())
	if !r.Embedded {
		fmt.Fprintf(w, ": %s", r.Ensemble)
	}
	fmt.Fprint(w, ".\n\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VALUE\tWRITES\tWRITES/S\tMB/S\tLATENCY P50\tLATENCY P99\tWRITTEN\tTO FOLLOWERS\tTO TXN LOGS\tIN EACH COMMIT LOG")
	for _, run := range r.Runs {
		toF, toL, inC := fmtBytes(run.ToFollowers), fmtBytes(run.ToLogs), fmtBytes(run.InCommitLog)
		if r.Embedded {
			toF, toL, inC = "- (one node)", "- (in memory)", "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\n", fmtBytes(int64(run.Size)), run.Writes, run.PerSecond, run.MBPerSec,
			fmtDur(run.LatencyP50), fmtDur(run.LatencyP99), fmtBytes(run.Written), toF, toL, inC)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VALUE\tCLIENT'S LIMIT\tRESULT")
	for _, a := range r.Attempts {
		fmt.Fprintf(tw, "%d bytes\t%d bytes\t%s\n", a.Size, a.ClientLimit, a.Result)
	}
	tw.Flush()
	if r.Embedded {
		fmt.Fprintln(w, `
These are a single node's figures, in memory: nothing was replicated or synced
to disk. On a 3-member ensemble every write also goes to 2 followers and into 3
transaction logs (a quorum of them synced to disk before the write is
acknowledged), and stays among each member's last 500 transactions in memory:
run it with --servers naming one.`)
	} else {
		fmt.Fprintln(w, `
TO FOLLOWERS, TO TXN LOGS: the value bytes the leader sends to its followers
and the members append to their transaction logs (estimated: written times
followers, times members). IN EACH COMMIT LOG: the values each member also
keeps in memory, beside the nodes, as its last 500 committed transactions
(zookeeper.commitLogCount) for bringing followers up to date: 500 writes of
400 KB hold 200 MB of every member's heap.`)
	}
	fmt.Fprintln(w, `ZooKeeper keeps every node in memory on every member and writes each change
through one leader: a 400 KB value costs 400 times the bandwidth, memory and
disk of a 1 KB one, and the server refuses a request above jute.maxbuffer
(1,048,575 bytes) by closing the connection.`)
}

// fmtBytes shows a byte count: a value size in KB (of 1024 bytes), a total
// in (decimal) MB.
func fmtBytes(n int64) string {
	switch {
	case n >= 10_000_000:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	case n >= 1_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
