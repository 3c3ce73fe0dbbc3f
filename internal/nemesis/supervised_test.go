package nemesis

import "testing"

// TestCheckSupervised: a supervised work counts as running until it
// noticed its context cancelled (Lost), so another supervisor's run that
// starts before is an overlap, unless the first's session was expired on
// purpose by then; one supervisor's run that starts before its previous
// run returned (its last Release) is a violation of its own, even when
// the previous one had noticed the cancellation.
func TestCheckSupervised(t *testing.T) {
	const a, b = 7, 9 // supervisor clients
	t.Run("clean", func(t *testing.T) {
		var h hist
		h.session(0, a, 1, true, 3)
		h.session(0, b, 1, true, 3)
		x := h.hold(a, 1, ResSupervised, Exclusive, 10, 1, 2.5) // returned at 2.5
		h.lost(2, x)                                            // cancelled, noticed at 2
		h.hold(b, 1, ResSupervised, Exclusive, 12, 2.1, 3)
		h.hold(a, 1, ResSupervised, Exclusive, 14, 3, 4)
		wantProps(t, Check(h.finish(), testConfig))
	})
	t.Run("not yet cancelled", func(t *testing.T) {
		var h hist
		h.session(0, a, 1, true, 3)
		h.session(0, b, 1, true, 3)
		x := h.hold(a, 1, ResSupervised, Exclusive, 10, 1, 2.5)
		h.lost(2.2, x)
		h.hold(b, 1, ResSupervised, Exclusive, 12, 2.1, 3)
		wantProps(t, Check(h.finish(), testConfig), PropExclusion)
	})
	t.Run("forced expiry", func(t *testing.T) {
		var h hist
		h.session(0, a, 1, true, 3)
		h.session(0, b, 1, true, 3)
		h.forced(1.5, a, 1)
		h.sessionEnd(4, a, 1, ErrKindSessionExpired, 1.4)
		x := h.hold(a, 1, ResSupervised, Exclusive, 10, 1, 4.5)
		h.lost(4, x)
		h.hold(b, 1, ResSupervised, Exclusive, 12, 2.1, 3)
		wantProps(t, Check(h.finish(), testConfig))
	})
	t.Run("twice at once", func(t *testing.T) {
		var h hist
		h.session(0, a, 1, true, 3)
		x := h.hold(a, 1, ResSupervised, Exclusive, 10, 1, 3) // returned at 3
		h.lost(2, x)
		h.hold(a, 1, ResSupervised, Exclusive, 12, 2.5, 4)
		wantProps(t, Check(h.finish(), testConfig), PropTwice)
	})
	t.Run("never returned", func(t *testing.T) {
		var h hist
		h.session(0, a, 1, true, 3)
		x := h.hold(a, 1, ResSupervised, Exclusive, 10, 1, -1)
		h.lost(2, x)
		h.hold(a, 1, ResSupervised, Exclusive, 12, 50, 51)
		wantProps(t, Check(h.finish(), testConfig), PropTwice)
	})
}
