//go:build linux

package sqltest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/fencing"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// holderProc is holder A running as a child process (this test binary,
// with holderEnv set): the test reads what it says line by line, and
// stops and resumes it with signals.
type holderProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // what A says, closed when its stdout ends
	exited chan struct{}
	thaw   func() error // ends the pause (zktest.Freeze)
	mu     sync.Mutex
	stderr bytes.Buffer
}

// lockedWriter writes to its holderProc's stderr buffer under the
// holderProc's lock: exec's copying goroutine writes while the test may
// read.
type lockedWriter struct{ h *holderProc }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	return w.h.stderr.Write(p)
}

// startHolder starts holder A with cfg. It is killed, if still running,
// when the test ends.
func startHolder(t *testing.T, cfg holderConfig) *holderProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &holderProc{t: t, lines: make(chan string, 16), exited: make(chan struct{})}
	h.cmd = exec.Command(exe, "-test.run=^$")
	h.cmd.Env = append(os.Environ(), holderEnv+"="+string(js))
	h.cmd.Stderr = lockedWriter{h}
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start holder A: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text() // a few lines: the buffer holds them all
		}
		close(h.lines)
		h.cmd.Wait() // once stdout is read to its end, as Wait wants
		close(h.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-h.exited:
			return
		default:
		}
		h.cmd.Process.Kill() // also when stopped
		<-h.exited
	})
	return h
}

// expect waits for A's next line and fails the test unless it starts
// with word; it returns the line's other fields.
func (h *holderProc) expect(word string) []string {
	h.t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok {
			h.fatalf("holder A ended, want %q", word)
		}
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != word {
			h.fatalf("holder A said %q, want %q", line, word)
		}
		return f[1:]
	case <-time.After(zktest.Bound(30 * time.Second)):
		h.fatalf("holder A said nothing for %v, want %q", zktest.Bound(30*time.Second), word)
	}
	return nil
}

func (h *holderProc) fatalf(format string, args ...any) {
	h.t.Helper()
	h.mu.Lock()
	stderr := h.stderr.String()
	h.mu.Unlock()
	h.t.Fatalf(format+"\nholder A's stderr:\n%s", append(args, stderr)...)
}

// expectToken is expect for a line "<word> <token>".
func (h *holderProc) expectToken(word string) int64 {
	h.t.Helper()
	f := h.expect(word)
	if len(f) != 1 {
		h.fatalf("holder A's %q line has %q, want one token", word, f)
	}
	tok, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		h.fatalf("holder A's %q line: %v", word, err)
	}
	return tok
}

// pause stops A with SIGSTOP and returns once the kernel shows it stopped:
// from then on its ZooKeeper client sends nothing, as in a long garbage
// collection or a frozen virtual machine.
func (h *holderProc) pause() {
	h.t.Helper()
	pid := h.cmd.Process.Pid
	thaw, err := zktest.Freeze(pid) // stays stopped under a stall injector's SIGCONTs
	if err != nil {
		h.t.Fatalf("holder A: %v", err)
	}
	h.thaw = thaw
	h.t.Cleanup(func() { thaw() })
	zktest.Eventually(h.t, 10*time.Second, "holder A stopped", func() error {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return err
		}
		// pid (comm) state ...: the state follows the last ')'.
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) == 0 || f[0] != "T" {
			return fmt.Errorf("state %q", f)
		}
		return nil
	})
}

// resume lets A go on past its pause: the line it waits for is in its
// stdin before SIGCONT, so it writes as soon as it runs again.
func (h *holderProc) resume() {
	h.t.Helper()
	if _, err := io.WriteString(h.stdin, "go\n"); err != nil {
		h.t.Fatalf("holder A's stdin: %v", err)
	}
	if err := h.thaw(); err != nil {
		h.t.Fatalf("holder A: %v", err)
	}
}

// wait waits for A to exit, and fails the test unless it exits 0.
func (h *holderProc) wait() {
	h.t.Helper()
	select {
	case <-h.exited:
	case <-time.After(zktest.Bound(30 * time.Second)):
		h.fatalf("holder A did not exit")
	}
	if code := h.cmd.ProcessState.ExitCode(); code != 0 {
		h.fatalf("holder A exited %d", code)
	}
}

// pausedCrash plays the crash scenario with holder A a separate process
// that is really paused. A (cfg) takes the lock and writes with its token;
// then the test stops it with SIGSTOP. Nothing else is done to A's
// session: the server expires it because A's client, stopped with its
// process, stops sending pings, once the session timeout passes. B (this
// test) is then granted the lock and writes with write. A is resumed with
// SIGCONT and at once writes with the token it read before its pause.
// pausedCrash returns A and both tokens once A said what became of its
// late write ("refused" and its fields are checked by the caller).
func pausedCrash(t *testing.T, cfg holderConfig, write func(token int64, who string) error) (a *holderProc, tokenA, tokenB int64, late []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
	defer cancel()
	cfg.ZK = zkAddrs(t)
	cfg.Lock = "/fencing-test/" + unique("lock")
	a = startHolder(t, cfg)
	tokenA = a.expectToken("locked")
	if w := a.expectToken("wrote"); w != tokenA {
		t.Fatalf("A wrote with token %d, locked with %d", w, tokenA)
	}
	a.expect("ready")

	b := zkrecipes.NewMutex(zkSession(t, zkAddrs(t)), cfg.Lock)
	a.pause()
	paused := time.Now()
	if err := b.Lock(ctx); err != nil {
		t.Fatalf("B: Lock while A is stopped: %v", err)
	}
	t.Cleanup(func() { b.Unlock(context.Background()) })
	// The grant needs A's session gone: only its expiry does that, a
	// session timeout after A was last heard, and A's client pings every
	// third of it: so at least two thirds of it after A stopped.
	if d := time.Since(paused); d < holderSessionTimeout/2 {
		t.Fatalf("B was granted the lock %v after A stopped, before A's session timeout (%v) could pass", d, holderSessionTimeout)
	}
	tokenB = b.Token()
	if tokenB <= tokenA {
		t.Fatalf("B's token %d is not above A's %d", tokenB, tokenA)
	}
	if err := write(tokenB, "B"); err != nil {
		t.Fatalf("B's write with token %d: %v", tokenB, err)
	}

	a.resume()
	select {
	case line := <-a.lines:
		late = strings.Fields(line)
	case <-time.After(zktest.Bound(30 * time.Second)):
		a.fatalf("holder A said nothing of its late write")
	}
	return a, tokenA, tokenB, late
}

// checkRefused fails the test unless A's late write, as A reported it,
// was refused with A's token and B's as the highest.
func checkRefused(t *testing.T, a *holderProc, late []string, tokenA, tokenB int64) {
	t.Helper()
	want := []string{"refused", strconv.FormatInt(tokenA, 10), strconv.FormatInt(tokenB, 10)}
	if strings.Join(late, " ") != strings.Join(want, " ") {
		a.fatalf("A's late write with token %d: A said %q, want %q (refused, B's token %d the highest)", tokenA, late, want, tokenB)
	}
}

// TestPauseSQL: holder A, a process of its own, is stopped (SIGSTOP) past
// its session timeout while holding the lock; B is granted the lock and
// writes; A, resumed (SIGCONT), writes with its old token through the
// fence table on PostgreSQL. A's transaction is refused and says so, the
// row keeps B's write, and A is then told its lock is lost.
func TestPauseSQL(t *testing.T) {
	zktest.CheckLeaks(t)
	ctx := context.Background()
	db := openPostgres(t)
	fence, accounts := newTable(t, db, fencing.PostgreSQL)
	write := func(token int64, who string) error {
		return fence.Write(ctx, db, nil, "acct-1", token, setOwner(ctx, fencing.PostgreSQL, accounts, "acct-1", who))
	}
	cfg := holderConfig{Mode: "sql", DSN: pg.dsn, Fence: fence.Name(), Accounts: accounts}
	a, tokenA, tokenB, late := pausedCrash(t, cfg, write)
	checkRefused(t, a, late, tokenA, tokenB)
	a.expect("lost")
	a.wait()
	if o := owner(t, db, accounts, "acct-1"); o != "B" {
		t.Fatalf("owner after A's late write: %q, want B", o)
	}
}

// TestPauseHTTP: the same through HTTP. A sends its token with
// fencing.Transport; the server's Guard keeps the highest tokens in
// ZooKeeper (ZooKeeperStore) and the handler fences its own write in
// PostgreSQL with the request's token. A's late request is refused with
// 409 and B's token, and its handler never runs; once A is told its lock
// is lost, its Transport sends nothing more.
func TestPauseHTTP(t *testing.T) {
	zktest.CheckLeaks(t)
	ctx := context.Background()
	db := openPostgres(t)
	fence, accounts := newTable(t, db, fencing.PostgreSQL)
	var handled atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /accounts/{id}/owner", func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		token, _ := fencing.TokenFrom(r.Context())
		body, _ := io.ReadAll(r.Body)
		if err := fence.Write(r.Context(), db, nil, r.URL.Path, token, setOwner(r.Context(), fencing.PostgreSQL, accounts, r.PathValue("id"), string(body))); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
		}
	})
	s := zkSession(t, zkAddrs(t))
	srv := httptest.NewServer((&fencing.Guard{Store: fencing.NewZooKeeperStore(s.Client(), registerDir(t, s), nil)}).Wrap(mux))
	defer srv.Close()
	url := srv.URL + "/accounts/acct-1/owner"
	client := &http.Client{Transport: &fencing.Transport{Base: srv.Client().Transport}}
	write := func(token int64, who string) error { return put(fencing.WithToken(ctx, token), client, url, who) }

	a, tokenA, tokenB, late := pausedCrash(t, holderConfig{Mode: "http", URL: url}, write)
	checkRefused(t, a, late, tokenA, tokenB)
	a.expect("lost")
	a.expect("unsent")
	a.wait()
	if n := handled.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, want 2 (A's and B's first writes)", n)
	}
	if o := owner(t, db, accounts, "acct-1"); o != "B" {
		t.Fatalf("owner after A's late request: %q, want B", o)
	}
}
