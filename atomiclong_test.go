package zkrecipes_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// TestAtomicLongLayout: Curator's 8 bytes, big-endian; a missing node (or
// one without data) is 0; the first change makes the node.
func TestAtomicLongLayout(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	path := e.path + "/a/n"
	a := zkrecipes.NewAtomicLong(e.session(), path)

	if v, err := a.Get(ctx); v != 0 || err != nil {
		t.Errorf("Get of a missing node = %d, %v; want 0", v, err)
	}
	if _, ok, _ := e.admin.Exists(path); ok {
		t.Errorf("Get made the node")
	}
	if v, err := a.Add(ctx, -3); v != -3 || err != nil {
		t.Fatalf("Add(-3) = %d, %v", v, err)
	}
	data, st, err := e.admin.Get(path)
	must(t, err, "get")
	if !bytes.Equal(data, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfd}) || st.EphemeralOwner != 0 {
		t.Errorf("node %x (owner 0x%x), want -3 as 8 bytes, persistent", data, st.EphemeralOwner)
	}
	if ok, err := a.Initialize(ctx, 10); ok || err != nil {
		t.Errorf("Initialize of an existing node = %v, %v; want false", ok, err)
	}
	if ok, err := a.CompareAndSwap(ctx, 7, 8); ok || err != nil {
		t.Errorf("CompareAndSwap(7, 8) on -3 = %v, %v; want false", ok, err)
	}
	if ok, err := a.CompareAndSwap(ctx, -3, 1<<40); !ok || err != nil {
		t.Errorf("CompareAndSwap(-3, 1<<40) = %v, %v; want true", ok, err)
	}
	if data, _, _ := e.admin.Get(path); !bytes.Equal(data, []byte{0, 0, 1, 0, 0, 0, 0, 0}) {
		t.Errorf("node %x after CompareAndSwap to 1<<40", data)
	}
	must(t, a.Set(ctx, 5), "Set")
	if v, _ := a.Get(ctx); v != 5 {
		t.Errorf("Get after Set(5) = %d", v)
	}

	b := zkrecipes.NewAtomicLong(e.session(), e.path+"/b")
	if ok, err := b.Initialize(ctx, 4); !ok || err != nil {
		t.Errorf("Initialize of a missing node = %v, %v; want true", ok, err)
	}
	_, err = e.admin.Set(e.path+"/b", nil, -1)
	must(t, err, "set")
	if v, err := b.Add(ctx, 1); v != 1 || err != nil {
		t.Errorf("Add(1) to a node without data = %d, %v; want 1", v, err)
	}
	_, err = e.admin.Set(e.path+"/b", []byte{1, 2, 3}, -1)
	must(t, err, "set")
	if _, err := b.Get(ctx); !errors.Is(err, zkrecipes.ErrCorruptValue) {
		t.Errorf("Get of a 3-byte node = %v, want ErrCorruptValue", err)
	}
	if _, err := zkrecipes.NewAtomicLong(e.session(), path, zkrecipes.WithPromotion("x", 1)).Get(ctx); !errors.Is(err, zkrecipes.ErrInvalidPath) {
		t.Errorf("a bad promotion path = %v, want ErrInvalidPath", err)
	}
}

// TestAtomicLongAdd: sessions adding to one counter at once, optimistically
// and promoted to a lock after one failed try, lose no addition; the
// promotion's lock leaves no node.
func TestAtomicLongAdd(t *testing.T) {
	for _, promoted := range []bool{false, true} {
		name := "optimistic"
		if promoted {
			name = "promoted"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			ctx := ctxTimeout(t, time.Minute)
			path, lock := e.path+"/n", e.path+"/lock"
			const workers, each = 4, 25
			var wg sync.WaitGroup
			for range workers {
				var opts []zkrecipes.AtomicOption
				if promoted {
					opts = append(opts, zkrecipes.WithPromotion(lock, 1))
				}
				a := zkrecipes.NewAtomicLong(e.session(), path, opts...)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						if _, err := a.Add(ctx, 1); !check(t, err, "Add") {
							return
						}
					}
				}()
			}
			wg.Wait()
			if v, err := zkrecipes.NewAtomicLong(e.session(), path).Get(ctx); v != workers*each || err != nil {
				t.Errorf("Get = %d, %v after %d additions", v, err, workers*each)
			}
			// The lock's node is a container the server removes only
			// minutes after its last child: it tells whether anyone
			// was promoted.
			if _, ok, _ := e.admin.Exists(lock); ok != promoted {
				t.Errorf("lock path exists: %v; want %v", ok, promoted)
			}
			e.empty(lock)
		})
	}
}

// TestAtomicLongUnconfirmed: the answer to an increment's create or write is
// lost. An increment that never reached the server is sent again; one sent
// is applied once at most: reported done, or unconfirmed, never applied a
// second time.
func TestAtomicLongUnconfirmed(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	p := e.proxy()
	s := e.sessionOn([]string{p.Addr()})
	a := zkrecipes.NewAtomicLong(s, e.path+"/n")
	e.mkdirs(e.path)

	want := int64(0)
	for _, step := range []struct {
		opcode  int32
		forward bool
	}{{1, false}, {1, true}, {5, false}, {5, true}} {
		p.CutOnRequest(step.opcode, step.forward)
		v, err := a.Add(ctx, 1)
		switch {
		case err == nil && v == want+1:
			want++
		case errors.Is(err, zkrecipes.ErrWriteUnconfirmed) && step.forward:
			// Applied, answer lost: nothing can tell.
			if got, _ := a.Get(ctx); got != want && got != want+1 {
				t.Errorf("value %d after an unconfirmed increment of %d", got, want)
			} else {
				want = got
			}
		default:
			t.Errorf("Add with opcode %d cut (sent on: %v) = %d, %v; want %d, or ErrWriteUnconfirmed if sent", step.opcode, step.forward, v, err, want+1)
		}
		if got, _ := a.Get(ctx); got != want {
			t.Errorf("value %d after opcode %d cut (sent on: %v), want %d: each increment applied at most once", got, step.opcode, step.forward, want)
			want = got
		}
	}

	// The create that makes the node is dropped, and another client makes
	// the node before this one is back: with another value, the increment
	// goes on from it; with the value this one would have written, nothing
	// tells the two creates apart.
	for _, other := range []int64{5, 1} {
		path := fmt.Sprintf("%s/made-%d", e.path, other)
		b := zkrecipes.NewAtomicLong(s, path)
		var v int64
		err := cutWhile(t, p, 1, "the create trap", "Add", func() (err error) { v, err = b.Add(ctx, 1); return err }, func() {
			_, err := e.admin.Create(path, binary.BigEndian.AppendUint64(nil, uint64(other)), zkclient.Persistent, openACL)
			must(t, err, "create")
		})
		switch {
		case other != 1 && (v != other+1 || err != nil):
			t.Errorf("Add after another client made the node with %d = %d, %v; want %d", other, v, err, other+1)
		case other == 1 && !errors.Is(err, zkrecipes.ErrWriteUnconfirmed):
			t.Errorf("Add after another client made the node with its own value = %d, %v; want ErrWriteUnconfirmed", v, err)
		}
	}
}

// TestCountersSessionEnd: on an expired session the counters' calls fail
// with ErrSessionExpired and a SharedCount's watch ends; a cancelled Add
// changes nothing.
func TestCountersSessionEnd(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	s := e.session()
	a := zkrecipes.NewAtomicLong(s, e.path+"/n")
	c := zkrecipes.NewSharedCount(s, e.path+"/c", 0)
	must(t, a.Set(ctx, 7), "Set")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.Add(cancelled, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Add with a cancelled context = %v", err)
	}
	if v, _ := a.Get(ctx); v != 7 {
		t.Errorf("value %d after a cancelled Add, want 7", v)
	}

	watch, err := c.Watch(ctx)
	must(t, err, "Watch")
	defer watch.Close()
	e.expire(s)
	for {
		_, err := nextWithin(watch, 20*time.Second)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("the watch of an expired session is still open after 20s")
		}
		if err != nil {
			if !errors.Is(err, zkrecipes.ErrSessionExpired) {
				t.Errorf("the watch of an expired session ended with %v, want ErrSessionExpired", err)
			}
			break
		}
	}
	if _, err := a.Add(ctx, 1); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Add on an expired session = %v", err)
	}
	if _, err := c.TrySetCount(ctx, 1, zkrecipes.VersionedCount{}); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("TrySetCount on an expired session = %v", err)
	}
}
