package zktest

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestFourLetter(t *testing.T) {
	checkLeaks(t)
	addr := sharedAddr(t)
	ctx := testContext(t)
	got, err := FourLetter(ctx, addr, "ruok")
	if err != nil || got != "imok" {
		t.Fatalf("ruok = %q, %v; want imok", got, err)
	}
	got, err = FourLetter(ctx, addr, "srvr")
	if err != nil {
		t.Fatal(err)
	}
	if mode, ok := serverMode(got); !ok || mode != "standalone" {
		t.Fatalf("srvr mode = %q, %v in %q", mode, ok, got)
	}
	if _, err := FourLetter(ctx, addr, "status"); err == nil {
		t.Fatal("six-letter word accepted")
	}
}

func TestServerMode(t *testing.T) {
	for in, want := range map[string]string{
		"Zookeeper version: 3.8.0\nMode: follower\nNode count: 5\n": "follower",
		"Mode: leader\n": "leader",
		"This ZooKeeper instance is not currently serving requests\n": "",
	} {
		if got, _ := serverMode(in); got != want {
			t.Errorf("serverMode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWatchersAndSessions(t *testing.T) {
	checkLeaks(t)
	addr := sharedAddr(t)
	ctx := testContext(t)
	before, err := Sessions(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := connectZK(t, addr)
	p := fmt.Sprintf("/watchers-%d", time.Now().UnixNano())
	if _, _, _, err := c.ExistsW(p); err != nil {
		t.Fatal(err)
	}
	if n, err := Watchers(ctx, addr, p); err != nil || n != 1 {
		t.Fatalf("Watchers(%s) = %d, %v; want 1", p, n, err)
	}
	if n, err := Watchers(ctx, addr, p+"-other"); err != nil || n != 0 {
		t.Fatalf("Watchers of an unwatched path = %d, %v; want 0", n, err)
	}
	if _, _, _, err := c.ExistsW(p + "/kid"); err != nil {
		t.Fatal(err)
	}
	if n, err := WatchersUnder(ctx, addr, p); err != nil || n != 2 {
		t.Fatalf("WatchersUnder(%s) = %d, %v; want 2", p, n, err)
	}
	if n, err := WatchersUnder(ctx, addr, p+"/kid/"); err != nil || n != 1 {
		t.Fatalf("WatchersUnder(%s/kid/) = %d, %v; want 1", p, n, err)
	}
	ids, err := Sessions(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ids, c.SessionID()) || len(ids) != len(before)+1 {
		t.Fatalf("Sessions = %x, want those before (%x) and 0x%x", ids, before, c.SessionID())
	}
}
