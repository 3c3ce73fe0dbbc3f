package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fencing"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestLockTokenThroughGuard is the end-to-end pattern of docs/fencing.md
// for shell users: the command of `zkr lock` sends $ZKR_FENCING_TOKEN with
// curl to a server behind a fencing.Guard. Two holders one after the other
// are admitted, the second with a higher token; a command that sends the
// first holder's token after the second wrote is refused with 409 (curl
// --fail-with-body exits 22, and zkr with it), and the server's handler
// never sees it.
func TestLockTokenThroughGuard(t *testing.T) {
	servers(t)
	if _, err := exec.LookPath("curl"); err != nil {
		zktest.SkipOrFail(t, zktest.Unavailable(errors.New("no curl: install it with `apt-get install -y curl` (scripts/install-deps.sh does)")))
	}
	var mu sync.Mutex
	var written []string
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /reports/today", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		written = append(written, string(body))
		mu.Unlock()
	})
	srv := httptest.NewServer((&fencing.Guard{Store: &fencing.MemoryStore{}}).Wrap(mux))
	defer srv.Close()
	path := testPath(t, "lock")
	// TOKEN defaults to the holding's own; the late writer sets it.
	script := `curl -sS --fail-with-body -X PUT -H "Fencing-Token: ${TOKEN:-$ZKR_FENCING_TOKEN}" --data-binary "by $ZKR_FENCING_TOKEN" "$URL" && echo "token $ZKR_FENCING_TOKEN"`
	run := func(env ...string) *proc {
		p := start(t, append(env, "URL="+srv.URL+"/reports/today"), "lock", path, "--", "sh", "-c", script)
		p.wait(30 * time.Second)
		return p
	}
	var tokens []int64
	for i := range 2 {
		p := run()
		tok, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(p.stdout.String()), "token "), 10, 64)
		if p.code != 0 || err != nil {
			t.Fatalf("holder %d: exit %d, stdout %q, stderr:\n%s", i+1, p.code, p.stdout.String(), p.stderr.String())
		}
		tokens = append(tokens, tok)
	}
	if tokens[1] <= tokens[0] {
		t.Fatalf("tokens %v: the second holder's is not higher", tokens)
	}

	late := run("TOKEN=" + strconv.FormatInt(tokens[0], 10))
	if late.code != 22 || !strings.Contains(late.stdout.String(), "refused") {
		t.Fatalf("a command sending the first holder's token %d after the second's %d: exit %d, stdout %q; want 22 (curl: HTTP error) and the Guard's refusal",
			tokens[0], tokens[1], late.code, late.stdout.String())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"by " + strconv.FormatInt(tokens[0], 10), "by " + strconv.FormatInt(tokens[1], 10)}
	if strings.Join(written, "|") != strings.Join(want, "|") {
		t.Fatalf("the handler got %q, want %q", written, want)
	}
}
