package zkrecipes_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// TestSharedCountLayout: the node holds Curator's 4 bytes, big-endian; the
// first read creates it with the seed; TrySetCount wins only on the version
// it was given.
func TestSharedCountLayout(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	path := e.path + "/a/count"
	c := zkrecipes.NewSharedCount(e.session(), path, -2)

	v, err := c.Count(ctx)
	must(t, err, "Count")
	data, st, err := e.admin.Get(path)
	must(t, err, "get")
	if v != (zkrecipes.VersionedCount{Value: -2, Version: 0}) || !bytes.Equal(data, []byte{0xff, 0xff, 0xff, 0xfe}) || st.EphemeralOwner != 0 {
		t.Fatalf("Count = %+v, node %x (owner 0x%x); want the seed -2 at version 0, ff ff ff fe, persistent", v, data, st.EphemeralOwner)
	}
	ok, err := c.TrySetCount(ctx, 1<<24+5, v)
	if !ok || err != nil {
		t.Fatalf("TrySetCount on the current version = %v, %v", ok, err)
	}
	if data, _, _ := e.admin.Get(path); !bytes.Equal(data, []byte{1, 0, 0, 5}) {
		t.Errorf("node data %x after TrySetCount(1<<24+5), want 01 00 00 05", data)
	}
	if ok, err := c.TrySetCount(ctx, 9, v); ok || err != nil {
		t.Errorf("TrySetCount on a stale version = %v, %v; want false, nil", ok, err)
	}
	must(t, c.SetCount(ctx, 42), "SetCount")
	if v, err := c.Count(ctx); err != nil || v != (zkrecipes.VersionedCount{Value: 42, Version: 2}) {
		t.Errorf("Count after SetCount(42) = %+v, %v; want 42 at version 2", v, err)
	}

	// SetCount makes a missing node; another client's bad data is reported.
	other := zkrecipes.NewSharedCount(e.session(), e.path+"/b", 0)
	must(t, other.SetCount(ctx, 3), "SetCount on a missing node")
	if data, _, _ := e.admin.Get(e.path + "/b"); !bytes.Equal(data, []byte{0, 0, 0, 3}) {
		t.Errorf("node made by SetCount holds %x", data)
	}
	_, err = e.admin.Set(e.path+"/b", []byte("xyz"), -1)
	must(t, err, "set")
	if _, err := other.Count(ctx); !errors.Is(err, zkrecipes.ErrCorruptValue) {
		t.Errorf("Count of a 3-byte node = %v, want ErrCorruptValue", err)
	}
	if _, err := zkrecipes.NewSharedCount(e.session(), "bad", 0).Count(ctx); !errors.Is(err, zkrecipes.ErrInvalidPath) {
		t.Errorf("Count on a bad path = %v, want ErrInvalidPath", err)
	}
}

// TestSharedCountIncrements: sessions incrementing one count through
// TrySetCount loops lose no increment.
func TestSharedCountIncrements(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	path := e.path + "/count"
	const workers, each = 4, 25
	var wg sync.WaitGroup
	for range workers {
		c := zkrecipes.NewSharedCount(e.session(), path, 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if !check(t, incrementShared(ctx, c), "increment") {
					return
				}
			}
		}()
	}
	wg.Wait()
	v, err := zkrecipes.NewSharedCount(e.session(), path, 0).Count(ctx)
	must(t, err, "Count")
	if v.Value != workers*each || v.Version != workers*each {
		t.Errorf("count %+v after %d increments", v, workers*each)
	}
}

// TestSharedCountWatch: the stream starts with the current value, follows
// another session's writes, waits through a deletion and ends with Close.
func TestSharedCountWatch(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	path := e.path + "/count"
	writer := zkrecipes.NewSharedCount(e.session(), path, 0)
	ch, err := zkrecipes.NewSharedCount(e.session(), path, 5).Watch(ctx)
	must(t, err, "Watch")
	next := func(want zkrecipes.VersionedCount) {
		t.Helper()
		v, err := nextWithin(ch, 20*time.Second)
		if err != nil || v != want {
			t.Fatalf("watch got %+v (%v), want %+v", v, err, want)
		}
	}
	next(zkrecipes.VersionedCount{Value: 5})
	must(t, writer.SetCount(ctx, 6), "SetCount")
	next(zkrecipes.VersionedCount{Value: 6, Version: 1})
	must(t, e.admin.Delete(path, -1), "delete")
	_, err = e.admin.Create(path, []byte{0, 0, 0, 9}, zkclient.Persistent, openACL)
	must(t, err, "create")
	next(zkrecipes.VersionedCount{Value: 9})
	ch.Close()
	if _, err := ch.Next(ctx); !errors.Is(err, zkrecipes.ErrStreamClosed) {
		t.Errorf("Next after Close = %v, want ErrStreamClosed", err)
	}
}

// TestSharedCountUnconfirmed: a TrySetCount whose answer is lost. If the
// write did not reach the server it is sent again and succeeds; if another
// client wrote a different value meanwhile it failed; if another client
// wrote the same value, nothing read afterwards tells that write from ours,
// and the error says so rather than claim or deny it.
func TestSharedCountUnconfirmed(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	path := e.path + "/count"
	p := e.proxy()
	c := zkrecipes.NewSharedCount(e.sessionOn([]string{p.Addr()}), path, 0)

	v, err := c.Count(ctx)
	must(t, err, "Count")
	p.CutOnRequest(5, false) // setData, dropped
	if ok, err := c.TrySetCount(ctx, 1, v); !ok || err != nil {
		t.Errorf("TrySetCount whose write never arrived = %v, %v; want it sent again: true", ok, err)
	}

	// Dropped, while another client writes before this one is back.
	for _, other := range []int32{9, 2} {
		v, err := c.Count(ctx)
		must(t, err, "Count")
		var ok bool
		err = cutWhile(t, p, 5, "the setData trap", "TrySetCount", func() (err error) { ok, err = c.TrySetCount(ctx, 2, v); return err }, func() {
			_, err := e.admin.Set(path, []byte{0, 0, 0, byte(other)}, v.Version)
			must(t, err, "set")
		})
		switch {
		case other != 2 && (ok || err != nil):
			t.Errorf("TrySetCount after another client wrote %d = %v, %v; want false", other, ok, err)
		case other == 2 && (ok || !errors.Is(err, zkrecipes.ErrWriteUnconfirmed) || !errors.Is(err, zkrecipes.ErrConnectionLoss)):
			t.Errorf("TrySetCount after another client wrote the same value = %v, %v; want ErrWriteUnconfirmed", ok, err)
		}
	}

	// Armed to forward: applied, unless the request went out on the
	// previous, dying connection (the client may not know it is dead yet
	// when the call is made) and never reached the trap; either
	// way it is applied once.
	v, err = c.Count(ctx)
	must(t, err, "Count")
	p.CutOnRequest(5, true)
	ok, err := c.TrySetCount(ctx, 3, v)
	if err != nil && !errors.Is(err, zkrecipes.ErrWriteUnconfirmed) || err == nil && !ok {
		t.Errorf("TrySetCount sent, answer lost = %v, %v; want true, or ErrWriteUnconfirmed", ok, err)
	}
	if now, _ := c.Count(ctx); now != (zkrecipes.VersionedCount{Value: 3, Version: v.Version + 1}) {
		t.Errorf("count %+v, want 3 at version %d: the write applied once", now, v.Version+1)
	}
}
