package zkrecipes

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Contenders sort by the numeric sequence suffix, never by the random
// prefix; kazoo's and Curator's names count; other children do not.
func TestSortedContenders(t *testing.T) {
	q := &line{dir: "/l", kinds: lockKinds}
	cs, err := q.sorted([]string{
		"_c_ffffffff-0000-0000-0000-000000000000-lock-0000000003",
		"0123abcd__lock__0000000001",
		"_c_00000000-0000-0000-0000-000000000000-__READ__0000000002",
		"0123abcd__rlock__0000000004",
		"leases",
		"_c_aaaaaaaa-0000-0000-0000-000000000000-lock-00000000x5",
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	for _, c := range cs {
		got = append(got, c.seq)
	}
	if !slices.Equal(got, []int32{1, 2, 3, 4}) {
		t.Errorf("order %v, want [1 2 3 4]", got)
	}
	if !cs[1].reader || cs[0].reader || !cs[3].reader {
		t.Errorf("reader flags wrong: %+v", cs)
	}
	// Reader #4 waits for the nearest earlier writer (#3), not the first.
	if b := blocker(cs, 3); b != 2 {
		t.Errorf("reader 4 waits for index %d, want 2", b)
	}
	if b := blocker(cs, 1); b != 0 {
		t.Errorf("reader 2 waits for index %d, want 0", b)
	}
}

// After 2^31 creates under one parent the counter wraps to negative
// numbers; the queue refuses to guess the order.
func TestSequenceWrapDetected(t *testing.T) {
	q := &line{dir: "/l", kinds: lockKinds}
	for _, wrapped := range []string{"_c_y-lock--2147483648", "_c_y-lock--000000001", "k__rlock__-000000007"} {
		_, err := q.sorted([]string{"_c_x-lock-2147483647", wrapped})
		if !errors.Is(err, ErrSequenceWrapped) {
			t.Errorf("sorted with %s = %v, want ErrSequenceWrapped", wrapped, err)
		}
	}
}

// locate finds, in one pass over an unsorted listing, what the sorted queue
// and blocker say: whether the ticket is listed and the contender it waits
// for.
func TestLocateAgreesWithSortedQueue(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	markers := []string{"_c_x-lock-", "_c_x-__READ__", "_c_x-__WRIT__", "k__rlock__", "k__lock__", "leases", "_c_x-latch-"}
	q := &line{dir: "/l", kinds: lockKinds}
	for round := range 2000 {
		var kids []string
		for seq := range 1 + rng.IntN(12) {
			if rng.IntN(4) == 0 {
				continue // deleted
			}
			kids = append(kids, fmt.Sprintf("%s%010d", markers[rng.IntN(len(markers))], seq))
		}
		rng.Shuffle(len(kids), func(i, j int) { kids[i], kids[j] = kids[j], kids[i] })
		cs, err := q.sorted(kids)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 {
			continue
		}
		i := rng.IntN(len(cs))
		tk := &ticket{q: q, protectedNode: protectedNode{name: cs[i].name}}
		if rng.IntN(5) == 0 { // a ticket no longer listed
			tk.name = fmt.Sprintf("_c_y-lock-%010d", 100+round)
			i = -1
		}
		got, err := tk.locate(kids)
		if err != nil {
			t.Fatal(err)
		}
		want := place{listed: i >= 0, ahead: i}
		if i >= 0 {
			if b := blocker(cs, i); b >= 0 {
				want.blocker = cs[b].name
			}
		} else {
			want.ahead = len(cs)
			r, _ := parseContender(tk.name, lockKinds)
			for j := len(cs) - 1; j >= 0; j-- {
				if blocks(cs[j], r.reader) {
					want.blocker = cs[j].name
					break
				}
			}
		}
		if got != want {
			t.Fatalf("listing %v, ticket %s: locate = %+v, sorted queue says %+v", kids, tk.name, got, want)
		}
	}
}

// A waiter locates itself in the whole listing on every wake-up; this is
// its cost with 500 contenders (Curator-style names).
func BenchmarkLocate500(b *testing.B) {
	q := &line{dir: "/l", kinds: lockKinds}
	kids := make([]string, 500)
	for i := range kids {
		kids[i] = fmt.Sprintf("_c_%08x-1111-2222-3333-444444444444-lock-%010d", i, 1000+i)
	}
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(kids), func(i, j int) { kids[i], kids[j] = kids[j], kids[i] })
	tk := &ticket{q: q, protectedNode: protectedNode{name: fmt.Sprintf("_c_%08x-1111-2222-3333-444444444444-lock-%010d", 400, 1400)}}
	b.ReportAllocs()
	for b.Loop() {
		if p, err := tk.locate(kids); err != nil || !p.listed || p.blocker == "" {
			b.Fatal(p, err)
		}
	}
}

// Sequence suffixes are read as ZooKeeper writes them (%010d), and nothing
// else passes for one.
func TestParseSeq(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int32
		ok   bool
	}{
		{"0000000000", 0, true},
		{"0000000042", 42, true},
		{"2147483647", 2147483647, true},
		{"-000000001", -1, true},
		{"-2147483648", -2147483648, true},
		{"2147483648", 0, false},
		{"-2147483649", 0, false},
		{"9999999999", 0, false},
		{"00000000x5", 0, false},
		{"+000000001", 0, false},
		{"-", 0, false},
		{"", 0, false},
		{"12345678901", 0, false},
	} {
		got, ok := parseSeq(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("parseSeq(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
