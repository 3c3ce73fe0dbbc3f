package sqltest

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/fencing"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// holderEnv, when set in the environment of this test binary, makes it a
// lock holder ([holderMain]) instead of running tests: the pause tests run
// holder A in a process of its own, so that they can stop it for real.
const holderEnv = "FENCING_TEST_HOLDER"

// holderSessionTimeout is holder A's session timeout: the server expires
// its session this long after A stops being heard.
const holderSessionTimeout = 2 * time.Second

// holderConfig is what holder A is told, as JSON in holderEnv.
type holderConfig struct {
	Mode     string   // "sql": write to PostgreSQL through Fence; "http": PUT through the Guard at URL
	ZK       []string // ZooKeeper's addresses
	Lock     string   // the lock's path
	DSN      string   // sql: PostgreSQL
	Fence    string   // sql: the fence table
	Accounts string   // sql: the guarded table
	URL      string   // http: where to PUT the owner
}

// holderMain is holder A. It takes the lock, says "locked <token>", writes
// "A" with its token while holding ("wrote"), says "ready" and waits for a
// line on stdin: the test stops the process (SIGSTOP) there, long enough
// for the server to expire its session and for B to take the lock and
// write, then sends the line and resumes it (SIGCONT). A then does what a
// paused holder does: it writes with the token it read before the pause,
// without looking at its lock, and says what became of the write:
// "refused <token> <highest>", "accepted", or "error <why>". Then it waits
// for its lock's Lost and says "lost"; in the http mode it then tries once
// more through a Transport whose Source is its lost lock, and says
// "unsent" when the Transport refuses to send. It returns the exit status.
func holderMain(config string) int {
	var cfg holderConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Printf("error %s: %v\n", holderEnv, err)
		return 2
	}
	if err := hold(cfg); err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	return 0
}

func hold(cfg holderConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(60*time.Second))
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, cfg.ZK, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(holderSessionTimeout)))
	if err != nil {
		return err
	}
	defer s.Close()
	m := zkrecipes.NewMutex(s, cfg.Lock)

	var write func(token int64, who string) error
	client := &http.Client{Transport: &fencing.Transport{Source: m}}
	switch cfg.Mode {
	case "sql":
		db, err := sql.Open("pgx", cfg.DSN)
		if err != nil {
			return err
		}
		defer db.Close()
		fence, err := fencing.NewTable(fencing.PostgreSQL, cfg.Fence)
		if err != nil {
			return err
		}
		write = func(token int64, who string) error {
			return fence.Write(ctx, db, nil, "acct-1", token, setOwner(ctx, fencing.PostgreSQL, cfg.Accounts, "acct-1", who))
		}
	case "http":
		defer client.CloseIdleConnections()
		write = func(token int64, who string) error {
			wctx := ctx
			if token != 0 {
				wctx = fencing.WithToken(ctx, token)
			}
			return put(wctx, client, cfg.URL, who)
		}
	default:
		return fmt.Errorf("mode %q, want sql or http", cfg.Mode)
	}

	if err := m.Lock(ctx); err != nil {
		return err
	}
	defer m.Unlock(context.Background())
	token := m.Token()
	fmt.Println("locked", token)
	if err := write(token, "A"); err != nil {
		return fmt.Errorf("write while holding: %w", err)
	}
	fmt.Println("wrote", token)

	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	// Resumed. The late write, with the token read before the pause.
	var stale *fencing.StaleError
	switch err := write(token, "A (late)"); {
	case errors.As(err, &stale):
		fmt.Println("refused", stale.Token, stale.Highest)
	case err != nil:
		return fmt.Errorf("late write: %w", err)
	default:
		fmt.Println("accepted")
	}

	select {
	case <-m.Lost():
		fmt.Println("lost")
	case <-ctx.Done():
		return errors.New("never told the lock was lost")
	}
	if cfg.Mode == "http" {
		if err := write(0, "A (lost)"); !errors.Is(err, fencing.ErrNoToken) {
			return fmt.Errorf("request through the lost lock's Transport: %v, want ErrNoToken", err)
		}
		fmt.Println("unsent")
	}
	return nil
}

// put PUTs who as the owner at url, and returns the Guard's refusal as
// fencing.CheckResponse makes it, or an error for any answer but 200.
func put(ctx context.Context, client *http.Client, url, who string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, strings.NewReader(who))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := fencing.CheckResponse(resp); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s: %s", url, resp.Status)
	}
	return nil
}
