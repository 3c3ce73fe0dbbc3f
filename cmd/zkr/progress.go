package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows how far demo and bench are: a bar on a terminal, one line
// per run otherwise.
type progress struct {
	w    io.Writer
	name string
	bar  *progressbar.ProgressBar // nil when w is not a terminal
	last atomic.Int64             // unix nanoseconds of the last step
}

func newProgress(w io.Writer, name string, total int) *progress {
	p := &progress{w: w, name: name}
	p.last.Store(time.Now().UnixNano())
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

// run announces a run.
func (p *progress) run(desc string) {
	p.last.Store(time.Now().UnixNano())
	if p.bar == nil {
		fmt.Fprintf(p.w, "%s: %s\n", p.name, desc)
		return
	}
	p.bar.Describe(desc)
}

// step counts one acquisition; it may be called concurrently.
func (p *progress) step(int) {
	p.last.Store(time.Now().UnixNano())
	if p.bar != nil {
		p.bar.Add(1)
	}
}

// finish removes the bar.
func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}

// errStalled is the cause of a run cancelled for making no progress.
var errStalled = errors.New("stalled")

// watchdog cancels ctx when no step was counted for stall: a server refusing
// connections (maxClientCnxns) would otherwise leave a run waiting forever.
func (p *progress) watchdog(ctx context.Context, stall time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if time.Since(time.Unix(0, p.last.Load())) > stall {
					cancel(errStalled)
					return
				}
			}
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}
