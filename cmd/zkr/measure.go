package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes/internal/bench"
)

// stallLimit is how long a run may go without an acquisition.
const stallLimit = time.Minute

// benchCase is one run of demo or bench: a workload, its contenders and
// its total acquisitions.
type benchCase struct {
	recipe       string
	clients      int
	acquisitions int
	chain        bool // see bench.Config.Chain
	// around, if set, is started with the run and stopped after it (the
	// demo's bystander).
	around func(ctx context.Context) (stop func())
	// requests, if set, reads the servers' request counters (see
	// bench.Config.Requests).
	requests func(context.Context) (bench.Requests, error)
}

// measure runs the cases one after the other on servers, each on a path of
// its own under root (a chroot of the servers, or "").
func (a *app) measure(ctx context.Context, cmd *cobra.Command, servers []string, root string, cases []benchCase) ([]bench.Result, error) {
	total := 0
	for _, c := range cases {
		total += c.acquisitions
	}
	p := newProgress(a.stderr, cmd.CommandPath(), total)
	defer p.finish()
	results := make([]bench.Result, 0, len(cases))
	for _, c := range cases {
		p.run(fmt.Sprintf("%s, clients=%d", label(c.recipe), c.clients))
		rctx, stop := p.watchdog(ctx, stallLimit)
		stopAround := func() {}
		if c.around != nil {
			stopAround = c.around(rctx)
		}
		r, err := bench.Run(rctx, c.recipe, bench.Config{
			Servers:      servers,
			Path:         fmt.Sprintf("%s/zkr-%s/%s-%d-%d", root, cmd.Name(), c.recipe, c.clients, time.Now().UnixNano()),
			Contenders:   c.clients,
			Acquisitions: c.acquisitions,
			Progress:     p.step,
			Chain:        c.chain,
			Requests:     c.requests,
		})
		stopAround()
		cause := context.Cause(rctx)
		stop()
		switch {
		case err == nil:
			results = append(results, r)
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case cause == errStalled:
			return nil, codef(exitFailure, "%s with %d clients made no progress for %v: does the server accept %d connections from this host (maxClientCnxns in zoo.cfg)?", c.recipe, c.clients, stallLimit, c.clients)
		default:
			return nil, withCode(exitFailure, fmt.Errorf("%s with %d clients: %w", c.recipe, c.clients, err))
		}
	}
	return results, nil
}

// label names a workload for people.
func label(recipe string) string {
	switch recipe {
	case "zkrecipes":
		return "zkrecipes Mutex, WithoutGrants"
	case "zkrecipes-requeue":
		return "zkrecipes Mutex.Requeue, WithoutGrants"
	case "zkrecipes-grant":
		return "zkrecipes Mutex, WithGrants"
	case "zkrecipes-grant-requeue":
		return "zkrecipes Mutex.Requeue, WithGrants"
	case "naive":
		return "naive lock (demo only)"
	case "floor":
		return "floor (event chain, no reads)"
	case "floor+listing":
		return "floor+listing (event chain, one listing per handoff)"
	}
	return recipe
}

// parseList parses a comma-separated list of numbers of clients.
func parseList(flag, s string) ([]int, error) {
	var ns []int
	for f := range strings.SplitSeq(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n < 1 || fmt.Sprint(n) != strings.TrimSpace(f) {
			return nil, usagef("--%s %q: %q is not a positive number", flag, s, f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// fmtDur shows a duration with a precision fit for a table.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(10 * time.Microsecond).String()
	}
}

// fmtPer shows a per-acquisition or per-release count; negative means the
// workload cannot be observed.
func fmtPer(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}
