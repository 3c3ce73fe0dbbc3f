package zkclient_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Watches restored after a reconnection are sent in several setWatches2
// packets when their paths add up to more than 128 KiB; every one of them
// still fires.
func TestManyWatchesRestored(t *testing.T) {
	e := newEnv(t)
	// The session outlives the 10000 creates made while it is cut off
	// (seconds under -race on a loaded machine): it is the restored
	// watches that are tested, not an expiry.
	c, px := e.connectProxied(zkclient.WithSessionTimeout(zktest.Bound(20 * time.Second)))
	other := e.connect()
	defer other.Close()
	const n = 10000 // 10000 paths of ~160 bytes: 1.5 MiB, over the server's 1 MiB frame limit
	pad := strings.Repeat("p", 100)
	var ws []*zkclient.Watch
	for i := range n {
		_, ok, w, err := c.ExistsW(e.ctx, fmt.Sprintf("%s/%s-%04d", e.base, pad, i))
		if err != nil || ok {
			t.Fatalf("existsW %d: %v %v", i, ok, err)
		}
		ws = append(ws, w)
	}
	states := c.States()
	defer states.Close()
	px.Refuse(true)
	px.Cut()
	waitState(t, states, zkclient.StateSuspended)
	var calls []*zkclient.Call[zkclient.Created]
	for i := range n {
		calls = append(calls, other.CreateAsync(fmt.Sprintf("%s/%s-%04d", e.base, pad, i), nil, zkclient.Persistent, all))
	}
	for _, call := range calls {
		if _, err := call.Wait(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	px.Refuse(false)
	waitState(t, states, zkclient.StateReconnected)
	deadline := time.After(zktest.Bound(20 * time.Second))
	for i, w := range ws {
		select {
		case ev := <-w.Event():
			if ev.Type != zkclient.EventNodeCreated {
				t.Fatalf("watch %d: %+v", i, ev)
			}
		case <-deadline:
			t.Fatalf("watch %d of %d did not fire after the reconnection", i, n)
		}
	}
}
