package zktest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
)

func TestStandaloneKillRestart(t *testing.T) {
	checkLeaks(t)
	var log bytes.Buffer // read only after Close
	c := StartT(t, Options{Log: &log})
	ctx := testContext(t)
	if mode, err := c.Mode(ctx, 0); err != nil || mode != "standalone" {
		t.Fatalf("Mode = %q, %v; want standalone", mode, err)
	}
	if got := c.Addrs(); len(got) != 1 || got[0] != c.Addr(0) || !strings.HasPrefix(got[0], "127.0.0.1:") {
		t.Fatalf("Addrs = %v, Addr(0) = %v", got, c.Addr(0))
	}

	conn := connectZK(t, c.Addr(0))
	if _, err := conn.Create(ctx, "/kept", []byte("x"), zkclient.Persistent, openACL); err != nil {
		t.Fatal(err)
	}

	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	if c.Running(0) {
		t.Fatal("Running after Kill")
	}
	if _, err := zkadmin.FourLetter(ctx, c.Addr(0), "ruok"); err == nil {
		t.Fatal("killed server answered ruok")
	}
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if !c.Running(0) {
		t.Fatal("not Running after Restart")
	}
	if err := c.Restart(ctx, 0); err == nil {
		t.Fatal("Restart of a running member succeeded")
	}
	// The client may not have seen the kill yet (the embedded server
	// restarts at once): read until it answers on its new connection.
	kept := false
	Eventually(t, 10*time.Second, "exists /kept after Restart", func() error {
		var err error
		_, kept, err = conn.Exists(ctx, "/kept")
		return err
	})
	if !kept {
		t.Fatal("node lost across Kill and Restart")
	}

	if err := c.Stop(0); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(0); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := zkadmin.FourLetter(ctx, c.Addr(0), "ruok"); err != nil || got != "imok" {
		t.Fatalf("ruok after Stop and Restart = %q, %v", got, err)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Restart(ctx, 0); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Fatalf("temp dir %s not removed: %v", c.dir, err)
	}
	if kind, _ := serverKind(); kind != "zkserver" && !strings.Contains(log.String(), "QuorumPeerConfig") {
		t.Fatalf("Options.Log got no server log:\n%s", log.String())
	}
}

func TestEnsembleSurvivesKill(t *testing.T) {
	checkLeaks(t)
	c := StartT(t, Options{Servers: 3})
	ctx := testContext(t)
	leader := -1
	for i := range 3 {
		mode, err := c.Mode(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		switch mode {
		case "leader":
			if leader >= 0 {
				t.Fatalf("members %d and %d are both leaders", leader, i)
			}
			leader = i
		case "follower":
		default:
			t.Fatalf("member %d in mode %q", i, mode)
		}
	}
	if leader < 0 {
		t.Fatal("no leader")
	}

	conn := connectZK(t, c.Addrs()...)
	if _, err := conn.Create(ctx, "/ensemble", nil, zkclient.Persistent, openACL); err != nil {
		t.Fatal(err)
	}

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if c.Running(leader) {
		t.Fatal("leader Running after Kill")
	}
	// The two others elect a new leader and serve on.
	Eventually(t, 30*time.Second, "one new leader among the other two", func() error {
		leaders := 0
		for i := range 3 {
			if i == leader {
				continue
			}
			mode, err := c.Mode(ctx, i)
			if err != nil {
				return fmt.Errorf("member %d: %w", i, err)
			}
			if mode != "leader" && mode != "follower" {
				return fmt.Errorf("member %d is %q", i, mode)
			}
			if mode == "leader" {
				leaders++
			}
		}
		if leaders != 1 {
			return fmt.Errorf("%d leaders", leaders)
		}
		return nil
	})
	waitConnected(t, conn, 20*time.Second)
	if !exists(t, conn, "/ensemble") {
		t.Fatal("node lost after the leader was killed")
	}

	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if mode, err := c.Mode(ctx, leader); err != nil || mode != "follower" && mode != "leader" {
		t.Fatalf("restarted member: Mode = %q, %v", mode, err)
	}
}

func TestStartFailureQuotesLog(t *testing.T) {
	skipIfEmbedded(t)
	checkLeaks(t)
	SkipOrFail(t, Available())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{Heap: "lots"})
	if err == nil {
		c.Close()
		t.Fatal("Start with a bad heap size succeeded")
	}
	if !strings.Contains(err.Error(), "Invalid maximum heap size") {
		t.Fatalf("error does not quote the log: %v", err)
	}
}
