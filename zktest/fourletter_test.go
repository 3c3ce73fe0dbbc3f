package zktest

import (
	"testing"
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
