package zktest

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// FindLeaks reports goroutines left running that opts do not ignore, as
// goleak.Find does, but gives them [Bound](2s) to end: on a loaded machine
// a goroutine that is on its way out may take longer than goleak's own
// retries (about a second) to be gone.
func FindLeaks(opts ...goleak.Option) error {
	return Poll(Bound(2*time.Second), func() error { return goleak.Find(opts...) })
}

// CheckLeaks fails tb if goroutines started after the call are still
// running once the cleanups tb registers later have run (with the budget
// of [FindLeaks]).
func CheckLeaks(tb testing.TB) {
	tb.Helper()
	ignore := goleak.IgnoreCurrent()
	tb.Cleanup(func() {
		if err := FindLeaks(ignore); err != nil {
			tb.Errorf("leaked goroutines: %v", err)
		}
	})
}
