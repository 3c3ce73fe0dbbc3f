package zkclient

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// TestObserverNoAllocs checks that an Observer costs the request path no
// allocation: a call's life (newCall, complete) allocates exactly as much
// with a Request func as without one.
func TestObserverNoAllocs(t *testing.T) {
	life := func(c *Client) float64 {
		return testing.AllocsPerRun(1000, func() {
			c.newCall(jute.OpGetData, "/a").complete(nil)
		})
	}
	var n int
	without := life(&Client{})
	with := life(&Client{cfg: config{obs: &Observer{Request: func(RequestEvent) { n++ }}}})
	if with != without {
		t.Errorf("a call allocates %v times with an observer, %v without", with, without)
	}
	if n == 0 {
		t.Error("the observer was not told")
	}
}
