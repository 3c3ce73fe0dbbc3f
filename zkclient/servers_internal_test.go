package zkclient

import (
	"math"
	"slices"
	"testing"
)

// TestRebalance checks ZooKeeper's client rebalancing rule case by case:
// who moves, with what probability, and where to.
func TestRebalance(t *testing.T) {
	abc := []string{"a:1", "b:1", "c:1"}
	for _, tc := range []struct {
		name      string
		prev      []string
		next      []string
		cur       string
		draw      float64
		move      bool
		probNew   float64
		newS, old int
	}{
		// 3 -> 5, current kept: move with probability 1 - 3/5 = 0.4.
		{"grow, stay", abc, []string{"a:1", "b:1", "c:1", "d:1", "e:1"}, "a:1", 0.4, false, 1, 2, 3},
		{"grow, move", abc, []string{"a:1", "b:1", "c:1", "d:1", "e:1"}, "a:1", 0.39, true, 1, 2, 3},
		// Same size or smaller with the current server kept: stay.
		{"same", abc, []string{"c:1", "b:1", "a:1"}, "b:1", 0, false, 1, 0, 3},
		{"shrink, kept", abc, []string{"a:1", "b:1"}, "a:1", 0, false, 1, 0, 2},
		// Current server removed, 3 -> 2 old ones: only old servers.
		{"shrink, removed", abc, []string{"a:1", "b:1"}, "c:1", 0.9, true, 0, 0, 2},
		// Current server replaced by a new one (3 -> 3): old servers get
		// numOld*(3-3)/... = 0, all go to the new one.
		{"replaced", abc, []string{"a:1", "b:1", "d:1"}, "c:1", 0.9, true, 1, 1, 2},
		// 4 -> 3, current removed, one new: probOld = 2*(4-3)/(3*(4-2)) = 1/3.
		{"removed and added", []string{"a:1", "b:1", "c:1", "x:1"}, []string{"a:1", "b:1", "d:1"}, "x:1", 0, true, 2.0 / 3, 1, 2},
		// Current server gone, list grew: to a new server.
		{"grow, removed", abc, []string{"a:1", "b:1", "d:1", "e:1"}, "c:1", 0.9, true, 1, 2, 2},
		// Nothing in common.
		{"all new", abc, []string{"d:1", "e:1"}, "a:1", 0.9, true, 1, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			move, newS, oldS, p := rebalance(tc.prev, tc.next, tc.cur, tc.draw)
			if move != tc.move || len(newS) != tc.newS || len(oldS) != tc.old {
				t.Fatalf("move %v new %v old %v; want move %v, %d new, %d old", move, newS, oldS, tc.move, tc.newS, tc.old)
			}
			if move && math.Abs(p-tc.probNew) > 1e-9 {
				t.Fatalf("probNew %v, want %v", p, tc.probNew)
			}
		})
	}
}

// TestRebalanceSpreads checks the rule's purpose: of many clients spread
// evenly over 3 servers, after the list grows to 5 about 2/5 move, and
// the load ends even.
func TestRebalanceSpreads(t *testing.T) {
	prev := []string{"a:1", "b:1", "c:1"}
	next := []string{"a:1", "b:1", "c:1", "d:1", "e:1"}
	const n = 30000
	load := map[string]int{}
	for i := range n {
		cur := prev[i%3]
		c := &Client{servers: next}
		move, newS, oldS, p := rebalance(prev, next, cur, float64(i%1000)/1000)
		if !move {
			load[cur]++
			continue
		}
		c.move = &movePlan{newS: newS, oldS: oldS, probNew: p}
		// The plan's first pick; newS is in list order here, so pick
		// among them by i to stand in for the shuffle.
		c.move.iNew = i % len(newS)
		load[c.nextServerLocked()]++
	}
	for _, s := range next {
		if got := load[s]; math.Abs(float64(got)-n/5) > n/50 {
			t.Errorf("%s has %d clients, want about %d: %v", s, got, n/5, load)
		}
	}
	if !slices.Equal(slices.Sorted(func(yield func(string) bool) {
		for s := range load {
			if !yield(s) {
				return
			}
		}
	}), next) {
		t.Errorf("servers used: %v", load)
	}
}

func TestParseConfig(t *testing.T) {
	data := "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n" +
		"server.2=zk2:2889:3889:observer;zk2c:2182\n" +
		"server.3=[::1]:2890:3890;2183\n" +
		"server.4=h4:1:2|h4b:3:4:participant\n" +
		"version=1000000ab"
	cfg, err := ParseConfig([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{
		{1, "127.0.0.1:2888:3888", "participant", "127.0.0.1:2181"},
		{2, "zk2:2889:3889", "observer", "zk2c:2182"},
		{3, "[::1]:2890:3890", "participant", "[::1]:2183"},
		{4, "h4:1:2|h4b:3:4", "participant", ""},
	}
	if !slices.Equal(cfg.Members, want) || cfg.Version != 0x1000000ab {
		t.Fatalf("got %+v version %x, want %+v", cfg.Members, cfg.Version, want)
	}
	if s := cfg.Servers(); !slices.Equal(s, []string{"127.0.0.1:2181", "zk2c:2182", "[::1]:2183"}) {
		t.Fatalf("Servers %v", s)
	}
	for _, bad := range []string{"server.x=a:1:2;3", "server.1=a:1:2;port", "version=zz", "server.1=nohost;1"} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if err := checkSpecs([]string{"server.4=a:1:2"}); err == nil {
		t.Error("a server line without a client port was accepted")
	}
	if err := checkSpecs([]string{"server.4=a:1:2;3,server.5=b:1:2;3"}); err == nil {
		t.Error("two server lines in one were accepted")
	}
}
