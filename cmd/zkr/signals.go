package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// forwarded are the signals zkr passes on to its command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// signals receives the signals zkr handles. Before the command starts, the
// first one cancels the waiting (lock, campaign, join); while the command
// runs they are forwarded to it.
type signals struct {
	ch chan os.Signal
}

// catchSignals starts catching the forwarded signals; stop with release.
func catchSignals() *signals {
	s := &signals{ch: make(chan os.Signal, 8)}
	signal.Notify(s.ch, forwarded...)
	return s
}

// release stops catching signals.
func (s *signals) release() { signal.Stop(s.ch) }

// cancelOn returns a context cancelled by the first signal, and a function
// that stops watching and returns that signal (nil if none came); it may be
// called more than once. Signals arriving after stop stay queued for the
// command.
func (s *signals) cancelOn(ctx context.Context) (context.Context, func() os.Signal) {
	ctx, cancel := context.WithCancel(ctx)
	quit, done := make(chan struct{}), make(chan os.Signal, 1)
	go func() {
		select {
		case sig := <-s.ch:
			cancel()
			done <- sig
		case <-quit:
			done <- nil
		}
	}()
	return ctx, sync.OnceValue(func() os.Signal {
		close(quit)
		sig := <-done
		cancel()
		return sig
	})
}
