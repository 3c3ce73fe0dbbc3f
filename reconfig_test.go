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

// TestMutexAcrossReconfig holds a lock while every member of the ensemble
// is replaced, one by one, by a new server on new addresses (new client
// ports): a member is added, then an old one removed and stopped, three
// times. The holder was given only the first member's address and follows
// the configuration: it learns the others, survives the stop of the member
// it was given, and ends on a member of the new configuration with the
// same session. The lock stays held throughout (Lost stays open, the
// token is unchanged, another contender is refused) and is released
// normally at the end.
func TestMutexAcrossReconfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member ensemble and replaces its members")
	}
	zktest.SkipOrFail(t, sharedErr)
	cluster := zktest.StartT(t, zktest.Options{Servers: 3, Reconfig: true})
	e := newEnvOn(t, cluster.Addrs())
	ctx := ctxTimeout(t, 3*time.Minute)
	lock := e.path + "/lock"
	follow := zkrecipes.WithClientOptions(zkclient.WithFollowConfig(), zkclient.WithSessionTimeout(8*time.Second))

	holder := e.sessionOn([]string{cluster.Addr(0)}, follow)
	hc, id := holder.Client(), holder.ID()
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
	token := m.Token()
	other := zkrecipes.NewMutex(e.sessionOn(cluster.Addrs(), follow), lock)

	admin, err := zkclient.Connect(ctx, cluster.Addrs(), zkclient.WithFollowConfig(),
		zkclient.WithDigestAuth(zktest.SuperUser, zktest.SuperPassword))
	must(t, err, "connect as the super user")
	defer admin.Close()
	// A client that follows the configuration may move to another member
	// right after it connects, failing a request in flight: retried.
	var cfg zkclient.EnsembleConfig
	zktest.Eventually(t, 10*time.Second, "read the config", func() error {
		cfg, err = admin.Config(ctx)
		if err != nil && !errors.Is(err, zkclient.ErrConnectionLoss) {
			t.Fatal(err)
		}
		return err
	})
	change := func(add []string, remove []int64) {
		t.Helper()
		cfg, err = zktest.Reconfig(ctx, admin, add, remove, cfg.Version)
		must(t, err, "reconfig")
	}
	stillHeld := func(what string) {
		t.Helper()
		select {
		case <-m.Lost():
			t.Fatalf("%s: the lock was lost", what)
		default:
		}
		if m.Token() != token || holder.ID() != id {
			t.Fatalf("%s: token %d session 0x%x, was %d 0x%x", what, m.Token(), holder.ID(), token, id)
		}
		zktest.Eventually(t, 10*time.Second, what+": another contender's TryLock is refused", func() error {
			err := other.TryLock(ctx) // its client may be moving: connection loss is retried
			switch {
			case errors.Is(err, zkrecipes.ErrLocked):
				return nil
			case errors.Is(err, zkrecipes.ErrConnectionLoss):
				return err
			}
			t.Fatalf("%s: another contender's TryLock: %v, want ErrLocked", what, err)
			return nil
		})
	}
	// follows waits until the holder's list is the configuration's
	// servers and it is connected to one of them.
	follows := func(what string) {
		t.Helper()
		want := slices.Sorted(slices.Values(cfg.Servers()))
		zktest.Eventually(t, 20*time.Second, what, func() error {
			s, on := slices.Sorted(slices.Values(hc.Servers())), hc.Server()
			if !slices.Equal(s, want) || !slices.Contains(want, on) || hc.State() == zkclient.StateSuspended {
				return fmt.Errorf("servers %v, on %s (%v); the config has %v", s, on, hc.State(), want)
			}
			return nil
		})
	}

	for old := range 3 {
		i, err := cluster.AddMember(ctx)
		must(t, err, "add a member")
		t.Cleanup(func() { cluster.Kill(i) }) // before the leak check, which began with 3 members
		change([]string{cluster.ServerSpec(i)}, nil)
		follows(fmt.Sprintf("the holder learns member %d", i+1))
		stillHeld(fmt.Sprintf("after adding member %d", i+1))

		change(nil, []int64{int64(old + 1)})
		follows(fmt.Sprintf("the holder forgets member %d", old+1))
		must(t, cluster.Kill(old), "stop member %d", old+1)
		stillHeld(fmt.Sprintf("after removing and stopping member %d", old+1))
	}
	for _, a := range cluster.Addrs()[:3] {
		if slices.Contains(cfg.Servers(), a) {
			t.Fatalf("an old address, %s, is in the final config\n%s", a, cfg.Raw)
		}
	}
	// The test's observer, on the old members, follows the ensemble too.
	must(t, e.admin.c.SetServers(cfg.Servers()), "move the observer")

	must(t, m.Unlock(ctx), "unlock")
	must(t, other.Lock(ctx), "the other contender locks")
	must(t, other.Unlock(ctx), "the other contender unlocks")
}
