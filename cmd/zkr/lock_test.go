package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// holdLock takes the lock on path from the test's own session, until the
// test ends.
func holdLock(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	if err := zkrecipes.NewMutex(testSession(t, ctx), path).Lock(ctx); err != nil {
		t.Fatal(err)
	}
}

// testSession opens a session of the test's own on the shared server,
// closed when the test ends.
func testSession(t *testing.T, ctx context.Context) *zkrecipes.Session {
	t.Helper()
	s, err := zkrecipes.NewSession(ctx, []string{servers(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestLockExcludes(t *testing.T) {
	servers(t)
	dir := t.TempDir()
	path := testPath(t, "lock")
	// Each command claims an exclusive marker (mkdir fails if it exists),
	// records its fencing token, works a while, and gives the marker back.
	script := `mkdir "$D/held" || echo "overlap $ZKR_FENCING_TOKEN" >> "$D/errors"
echo "$ZKR_FENCING_TOKEN" >> "$D/tokens"
sleep 0.2
rmdir "$D/held"`
	env := []string{"D=" + dir}
	const procs, rounds = 3, 2
	for range rounds {
		var ps []*proc
		for range procs {
			ps = append(ps, start(t, env, "lock", path, "--", "sh", "-c", script))
		}
		for _, p := range ps {
			if code := p.wait(30 * time.Second); code != 0 {
				t.Fatalf("zkr lock exited with %d; stderr:\n%s", code, p.stderr.String())
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "errors")); err == nil {
		t.Fatalf("two commands held the lock at once:\n%s", b)
	}
	b, err := os.ReadFile(filepath.Join(dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	var tokens []int64
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n <= 0 {
			t.Fatalf("bad ZKR_FENCING_TOKEN %q", f)
		}
		tokens = append(tokens, n)
	}
	if len(tokens) != procs*rounds {
		t.Fatalf("%d commands ran, want %d", len(tokens), procs*rounds)
	}
	if !slices.IsSorted(tokens) || len(slices.Compact(slices.Clone(tokens))) != len(tokens) {
		t.Errorf("fencing tokens do not strictly increase from holder to holder: %v", tokens)
	}
	if kids := children(t, admin(t), path); len(kids) != 0 {
		t.Errorf("nodes left behind: %v", kids)
	}
}

func TestLockExitCodes(t *testing.T) {
	servers(t)
	free := testPath(t, "free")
	held := testPath(t, "held")
	holdLock(t, held)
	conn := admin(t)
	notExec := filepath.Join(t.TempDir(), "data.txt")
	if err := os.WriteFile(notExec, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		args []string
		code int
		msg  string // in stderr
	}{
		{"command status", []string{"lock", free, "--", "sh", "-c", "exit 7"}, 7, ""},
		{"command killed", []string{"lock", free, "--", "sh", "-c", "kill -9 $$"}, 128 + 9, ""},
		{"timeout", []string{"lock", "--timeout", "300ms", held, "--", "true"}, exitTimeout, "timed out after 300ms"},
		{"try held", []string{"lock", "--try", held, "--", "true"}, exitHeld, "held by another process"},
		{"try free", []string{"lock", "--try", free, "--", "true"}, 0, ""},
		{"not found", []string{"lock", free, "--", "zkr-no-such-command"}, exitNotFound, "executable file not found"},
		{"not executable", []string{"lock", free, "--", notExec}, exitCannotExec, "permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := zkr(t, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, tt.code, r.stderr)
			}
			if tt.msg != "" {
				oneLineError(t, r)
				if !strings.Contains(r.stderr, tt.msg) {
					t.Errorf("stderr %q does not say %q", r.stderr, tt.msg)
				}
			}
		})
	}
	if kids := children(t, conn, held); len(kids) != 1 {
		t.Errorf("after timeout and try, %s should hold only the test's node: %v", held, kids)
	}
	if kids := children(t, conn, free); len(kids) != 0 {
		t.Errorf("nodes left behind in %s: %v", free, kids)
	}
}

func TestLockSharedAndWrite(t *testing.T) {
	servers(t)
	conn := admin(t)
	dir := t.TempDir()
	path := testPath(t, "rw")
	env := []string{"D=" + dir}
	// Two readers overlap; the writer runs alone. A reader holds until the
	// test releases it, so the order of the three is what the test waits
	// for, not how fast each process starts.
	reader := `touch "$D/reading.$$"; while [ ! -e "$D/release" ]; do sleep 0.05; done
ls "$D" | grep -c '^reading' >> "$D/counts"; [ -e "$D/writing" ] && echo overlap >> "$D/errors"; rm "$D/reading.$$"`
	writer := `ls "$D" | grep -q '^reading' && echo overlap >> "$D/errors"; touch "$D/writing"; sleep 0.3; rm "$D/writing"`
	r1 := start(t, env, "lock", "--shared", path, "--", "sh", "-c", reader)
	r2 := start(t, env, "lock", "--shared", path, "--", "sh", "-c", reader)
	eventually(t, 10*time.Second, "the two readers do not hold the lock together", func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "reading.*"))
		return len(files) == 2 || r1.exited() || r2.exited()
	})
	w := start(t, env, "lock", "--write", path, "--", "sh", "-c", writer)
	eventually(t, 10*time.Second, "the writer did not queue behind the readers", func() bool {
		return len(children(t, conn, path)) == 3 || w.exited()
	})
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proc{r1, r2, w} {
		if code := p.wait(30 * time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "errors")); err == nil {
		t.Fatalf("a writer ran beside a reader:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "counts")); !strings.Contains(string(b), "2") {
		t.Errorf("the two readers never held together; counts seen: %q", b)
	}
	if kids := children(t, conn, path); len(kids) != 0 {
		t.Errorf("nodes left behind: %v", kids)
	}
}

func TestLockLost(t *testing.T) {
	servers(t)
	tests := []struct {
		name   string
		script string // run under the lock; writes $D/started
		term   bool   // the command notes SIGTERM in $D/term
		ended  string // how zkr says the command ended
	}{
		{"command stops on SIGTERM", `trap 'echo TERM > "$D/term"; exit 0' TERM
echo started > "$D/started"
while :; do sleep 0.05; done`, true, "stopped the command (exit status 0)"},
		{"command ignores SIGTERM", `trap '' TERM
echo started > "$D/started"
while :; do sleep 0.05; done`, false, "stopped the command (killed by SIGKILL)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			proxy := zktest.NewProxyT(t, servers(t))
			dir := t.TempDir()
			path := testPath(t, "lock")
			p := start(t, []string{"D=" + dir}, "lock", "--servers", proxy.Addr(), "--session-timeout", "3s", "--grace", "500ms",
				path, "--", "sh", "-c", tt.script)
			eventually(t, 10*time.Second, "the command did not start", func() bool { return fileExists(filepath.Join(dir, "started")) })

			// A partition: the server hears nothing from zkr's session and
			// expires it after 3s; zkr, strict, gives the lock up after
			// 1.5s of silence.
			proxy.Blackhole()
			t0 := time.Now()
			code := p.wait(20 * time.Second)
			if code != exitLost {
				t.Fatalf("exit %d, want %d (lock lost); stderr:\n%s", code, exitLost, p.stderr.String())
			}
			if tt.term && !fileExists(filepath.Join(dir, "term")) {
				t.Errorf("the command was not sent SIGTERM")
			}
			msg := zkrLines(t, p.stderr.String())
			if !strings.Contains(msg, "lost the lock on "+path) || !strings.Contains(msg, tt.ended) {
				t.Errorf("stderr does not say the lock was lost and the command %q: %q", tt.ended, msg)
			}
			t.Logf("zkr exited %v after the partition began: %s", time.Since(t0).Round(time.Millisecond), msg)

			// The server expired the session: the node is gone.
			proxy.Pass()
			conn := admin(t)
			eventually(t, 10*time.Second, "the lost holder's node is still there", func() bool { return len(children(t, conn, path)) == 0 })
		})
	}
}

func TestLockSignals(t *testing.T) {
	servers(t)
	conn := admin(t)

	t.Run("forwarded to the command", func(t *testing.T) {
		dir := t.TempDir()
		path := testPath(t, "lock")
		script := `trap 'echo TERM > "$D/term"; exit 3' TERM
echo started > "$D/started"
while :; do sleep 0.05; done`
		p := start(t, []string{"D=" + dir}, "lock", path, "--", "sh", "-c", script)
		eventually(t, 10*time.Second, "the command did not start", func() bool { return fileExists(filepath.Join(dir, "started")) })
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(10 * time.Second); code != 3 {
			t.Fatalf("exit %d, want the command's 3; stderr:\n%s", code, p.stderr.String())
		}
		if !fileExists(filepath.Join(dir, "term")) {
			t.Errorf("the command did not get SIGTERM")
		}
		if kids := children(t, conn, path); len(kids) != 0 {
			t.Errorf("the lock was not released: %v", kids)
		}
	})

	t.Run("while waiting", func(t *testing.T) {
		path := testPath(t, "lock")
		holdLock(t, path)
		p := start(t, nil, "lock", path, "--", "true")
		eventually(t, 10*time.Second, "zkr did not queue", func() bool { return len(children(t, conn, path)) == 2 })
		p.cmd.Process.Signal(syscall.SIGINT)
		if code := p.wait(10 * time.Second); code != exitSignal+int(syscall.SIGINT) {
			t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitSignal+int(syscall.SIGINT), p.stderr.String())
		}
		oneLineError(t, result{stderr: p.stderr.String()})
		if kids := children(t, conn, path); len(kids) != 1 {
			t.Errorf("zkr left its node in the queue: %v", kids)
		}
	})
}

// --try works on both sides of the read/write lock, and the plain lock
// counts as a writer there.
func TestLockTrySharedAndWrite(t *testing.T) {
	servers(t)
	conn := admin(t)
	path := testPath(t, "rwtry")
	dir := t.TempDir()
	reader := start(t, []string{"D=" + dir}, "lock", "--shared", path, "--", "sh", "-c", untilReleased)
	eventually(t, 10*time.Second, "the reader's command did not start", func() bool {
		return fileExists(filepath.Join(dir, "started")) || reader.exited()
	})
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"lock", "--try", "--shared", path, "--", "true"}, 0},
		{[]string{"lock", "--try", "--write", path, "--", "true"}, exitHeld},
		{[]string{"lock", "--try", path, "--", "true"}, exitHeld},
	} {
		if r := zkr(t, c.args...); r.code != c.want {
			t.Errorf("zkr %v: exit %d, want %d; stderr %q", c.args, r.code, c.want, r.stderr)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := reader.wait(30 * time.Second); code != 0 {
		t.Fatalf("reader: exit %d; stderr:\n%s", code, reader.stderr.String())
	}
	if kids := children(t, conn, path); len(kids) != 0 {
		t.Errorf("nodes left behind: %v", kids)
	}
}

// TestHoldReleases checks that lock, elect and join give their holding
// back themselves (-v says so) rather than leave it to the closing of the
// session, which deletes the node too.
func TestHoldReleases(t *testing.T) {
	servers(t)
	path := testPath(t, "x")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", path + "/lock", "--", "true"}, "released the lock on " + path + "/lock"},
		{[]string{"elect", path + "/elect", "--id", "a", "--", "true"}, "released leadership of " + path + "/elect"},
		{[]string{"join", path + "/group", "--id", "a", "--", "true"}, `released membership "a" of ` + path + "/group"},
	} {
		r := zkr(t, append([]string{"-v"}, tt.args...)...)
		if r.code != 0 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("zkr -v %q: exit %d, stderr does not say %q:\n%s", tt.args, r.code, tt.want, r.stderr)
		}
	}
}
