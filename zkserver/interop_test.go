package zkserver_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/interop"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// kazooScript exercises kazoo against the server named by argv[1]: it
// prints one line per check and "DONE" at the end; any failure raises.
const kazooScript = `
from kazoo.exceptions import NodeExistsError, BadVersionError, NoNodeError
zk.create("/kz", b"v0")
try:
    zk.create("/kz", b"")
    raise SystemExit("create twice succeeded")
except NodeExistsError:
    print("nodeexists ok")
data, st = zk.get("/kz")
assert data == b"v0" and st.version == 0, (data, st)
seen = []
got = threading.Event()
def watch(ev):
    seen.append((ev.type, ev.path)); got.set()
zk.get("/kz", watch=watch)
zk.set("/kz", b"v1", version=0)
assert got.wait(5), "no watch event"
print("event", seen[0][0], seen[0][1])
try:
    zk.set("/kz", b"v2", version=0)
    raise SystemExit("bad version accepted")
except BadVersionError:
    print("badversion ok")
p = zk.create("/kz/e-", b"", ephemeral=True, sequence=True)
print("sequential", p)
tx = zk.transaction()
tx.create("/kz/t1", b"a")
tx.check("/kz", 1)
tx.set_data("/kz/t1", b"b")
res = tx.commit()
print("transaction", res[0], res[1], res[2].version)
tx = zk.transaction()
tx.create("/kz/t2", b"")
tx.delete("/kz/missing")
res = tx.commit()
print("failed transaction", [type(r).__name__ for r in res], zk.exists("/kz/t2") is None)
zk.delete("/kz", recursive=True)
try:
    zk.get("/kz")
except NoNodeError:
    print("deleted ok")
zk.stop()
print("DONE")
`

func TestKazooClient(t *testing.T) {
	if err := interop.KazooAvailable(); err != nil {
		t.Skip(err)
	}
	s := zkserver.RunT(t)
	out := runKazoo(t, kazooScript, s.Addr())
	for _, want := range []string{
		"nodeexists ok", "event CHANGED /kz", "badversion ok", "sequential /kz/e-0000000000",
		"transaction /kz/t1 True 1", "failed transaction ['RolledBackError', 'NoNodeError'] True", "deleted ok",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kazoo output lacks %q:\n%s", want, out)
		}
	}
}

// TestCuratorAndKazooMutex runs Apache Curator's InterProcessMutex (the
// Java client) and kazoo's Lock, two contenders each, on one lock in
// zkserver; the contenders check mutual exclusion through marker files.
func TestCuratorAndKazooMutex(t *testing.T) {
	if err := interop.CuratorAvailable(); err != nil {
		t.Skip(err)
	}
	if err := interop.KazooAvailable(); err != nil {
		t.Skip(err)
	}
	s := zkserver.RunT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	curator, err := interop.BuildCurator(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	marker := t.TempDir()
	var wg sync.WaitGroup
	for i, kind := range []string{"curator", "curator", "kazoo", "kazoo"} {
		argv, err := interop.Args{Connect: s.Addr(), Path: "/interop/lock", Recipe: "mutex", Count: 3,
			Hold: 20 * time.Millisecond, Marker: marker, ID: kind + string(rune('0'+i))}.Argv()
		if err != nil {
			t.Fatal(err)
		}
		var cmd *exec.Cmd
		if kind == "curator" {
			cmd = curator(ctx, argv...)
		} else {
			cmd = interop.Kazoo(ctx, argv...)
		}
		cmd.Stderr = os.Stderr
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			acq := 0
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "ACQ ") {
					acq++
				}
				if strings.HasPrefix(line, "VIOLATION") {
					t.Errorf("%s", line)
				}
			}
			if err := cmd.Wait(); err != nil || acq != 3 {
				t.Errorf("%s: %d acquisitions, %v", kind, acq, err)
			}
		}()
	}
	wg.Wait()
}
