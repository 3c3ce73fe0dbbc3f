package zktest

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ScaleEnv is the environment variable that stretches every upper time
// bound a test derives with [Bound]: a positive number such as 2 or 3.5.
// Unset, the factor is 1. Under the race detector it is doubled.
const ScaleEnv = "ZKTEST_SCALE"

var scale = sync.OnceValue(func() float64 {
	f := 1.0
	if v := os.Getenv(ScaleEnv); v != "" {
		if p, err := strconv.ParseFloat(v, 64); err == nil && p > 0 {
			f = p
		} else {
			fmt.Fprintf(os.Stderr, "zktest: ignoring %s=%q: not a positive number\n", ScaleEnv, v)
		}
	}
	if raceEnabled {
		f *= 2
	}
	return f
})

// Scale returns the factor by which tests stretch their upper time bounds:
// $ZKTEST_SCALE (1 when unset), doubled when the race detector is on. A
// loaded or starved machine (CI, a stall injector) sets the variable higher;
// the test's logic stays the same.
//
// Only upper bounds scale: how long to wait for something that must happen.
// A lower bound, "it must not happen before T", is a property of the code
// under test and is never scaled.
func Scale() float64 { return scale() }

// Bound returns d stretched by [Scale]: the one way a test turns a time
// bound it would accept on a quiet machine into the bound it waits for.
func Bound(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Scale())
}

// Eventually calls f until it returns nil, every 10ms at first and every
// 100ms at most, and fails tb if [Bound](d) passes first, with what and
// the last error f returned. It is how a test waits for an effect it can
// observe (a node, a watch count, a line of output) instead of sleeping
// until it is probably there.
func Eventually(tb testing.TB, d time.Duration, what string, f func() error) {
	tb.Helper()
	if err := Poll(Bound(d), f); err != nil {
		tb.Fatalf("after %v: %s: %v", Bound(d), what, err)
	}
}

// Poll calls f until it returns nil or d passes, every 10ms at first and
// every 100ms at most, and returns nil or f's last error. Unlike
// [Eventually] it does not scale d and fails no test: for helpers that
// report to their caller.
func Poll(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	pause := 10 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(min(pause, time.Until(deadline)+time.Millisecond))
		pause = min(2*pause, 100*time.Millisecond)
	}
}
