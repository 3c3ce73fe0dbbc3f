package zkrecipes_test

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The lock's parent is a container node: the server removes it once it is
// empty. A Lock whose create is lost with the connection while the parent
// is gone must create the parent again, not fail. Real ZooKeeper checks
// containers every minute; zkserver can be told to check now.
func TestMutexParentContainerRemoved(t *testing.T) {
	srv := zkserver.RunT(t)
	e := newEnvOn(t, []string{srv.Addr()})
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	p := zktest.NewProxyT(t, srv.Addr())
	m := zkrecipes.NewMutex(e.sessionOn([]string{p.Addr()}), lock)

	for _, forward := range []bool{false, true} {
		must(t, m.Lock(ctx), "Lock")
		must(t, m.Unlock(ctx), "Unlock")
		srv.CheckContainers()
		if _, ok, _ := e.admin.Exists(lock); ok {
			t.Fatalf("the empty container %s was not removed", lock)
		}
		p.CutOnRequest(15, forward) // create2
		must(t, m.Lock(ctx), "Lock after the parent was removed, create cut (reached server: %v)", forward)
		if kids := e.children(lock); len(kids) != 1 {
			t.Errorf("nodes %v, want exactly ours", kids)
		}
		must(t, m.Unlock(ctx), "Unlock")
	}
	e.empty(lock)
}
