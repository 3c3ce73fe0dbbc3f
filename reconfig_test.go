package zkrecipes_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestMutexAcrossReconfig holds a lock while the ensemble changes under
// its session: the holder, given only the first member's address and
// following the configuration, sees a member added and then the member it
// is connected to removed. Its session moves to a member of the new
// configuration; the lock stays held throughout (Lost stays open, another
// contender is refused) and is released normally at the end.
func TestMutexAcrossReconfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member ensemble")
	}
	zktest.SkipOrFail(t, sharedErr)
	cluster := zktest.StartT(t, zktest.Options{Servers: 3, Reconfig: true})
	e := newEnvOn(t, cluster.Addrs())
	ctx := ctxTimeout(t, 2*time.Minute)
	lock := e.path + "/lock"

	holder := e.sessionOn([]string{cluster.Addr(0)}, zkrecipes.WithClientOptions(
		zkclient.WithFollowConfig(), zkclient.WithSessionTimeout(8*time.Second)))
	hc := holder.Client()
	zktest.Eventually(t, 10*time.Second, "the holder learns the members", func() error {
		if s := hc.Servers(); len(s) != 3 {
			return fmt.Errorf("servers %v", s)
		}
		return nil
	})
	m := zkrecipes.NewMutex(holder, lock)
	zktest.Eventually(t, 10*time.Second, "the holder takes the lock", func() error {
		err := m.Lock(ctx) // a move the new members caused may fail it once
		if err != nil && !errors.Is(err, zkrecipes.ErrConnectionLoss) {
			t.Fatal(err)
		}
		return err
	})
	other := zkrecipes.NewMutex(e.session(), lock)

	admin, err := zkclient.Connect(ctx, cluster.Addrs(), zkclient.WithDigestAuth(zktest.SuperUser, zktest.SuperPassword))
	must(t, err, "connect as the super user")
	defer admin.Close()
	change := func(add []string, remove []int64) zkclient.EnsembleConfig {
		t.Helper()
		cfg, err := admin.Config(ctx)
		must(t, err, "read the config")
		next, err := zktest.Reconfig(ctx, admin, add, remove, cfg.Version)
		must(t, err, "reconfig")
		return next
	}
	stillHeld := func(what string) {
		t.Helper()
		select {
		case <-m.Lost():
			t.Fatalf("%s: the lock was lost", what)
		default:
		}
		if err := other.TryLock(ctx); !errors.Is(err, zkrecipes.ErrLocked) {
			t.Fatalf("%s: another contender's TryLock: %v, want ErrLocked", what, err)
		}
	}

	i, err := cluster.AddMember(ctx)
	must(t, err, "add a member")
	t.Cleanup(func() { cluster.Kill(i) }) // before the leak check, which began with 3 members
	cfg := change([]string{cluster.ServerSpec(i)}, nil)
	zktest.Eventually(t, 10*time.Second, "the holder learns the new member", func() error {
		if !slices.Contains(hc.Servers(), cluster.Addr(i)) {
			return fmt.Errorf("servers %v", hc.Servers())
		}
		return nil
	})
	stillHeld("after adding a member")

	from := hc.Server()
	var victim int64 = -1
	for _, mb := range cfg.Members {
		if mb.Client == from {
			victim = mb.ID
		}
	}
	if victim < 0 {
		t.Fatalf("the holder is on %s, not a member of\n%s", from, cfg.Raw)
	}
	cfg = change(nil, []int64{victim})
	zktest.Eventually(t, 20*time.Second, "the holder moves to a member of the new config", func() error {
		if s := hc.Server(); s == from || !slices.Contains(cfg.Servers(), s) || hc.State() == zkclient.StateSuspended {
			return fmt.Errorf("on %s (%v)", s, hc.State())
		}
		return nil
	})
	stillHeld("after removing the holder's member")

	must(t, m.Unlock(ctx), "unlock")
	must(t, other.Lock(ctx), "the other contender locks")
	must(t, other.Unlock(ctx), "the other contender unlocks")
}
