package sqltest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/fencing"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// One PostgreSQL and one ZooKeeper serve the whole package.
var (
	pg    *postgres
	pgErr error
	zk    *zktest.Cluster
	zkErr error
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(holderEnv); cfg != "" {
		os.Exit(holderMain(cfg)) // a pause test's holder A, not a test run
	}
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(90*time.Second))
	// The two start at once: a JVM and initdb take seconds each.
	pgDone := make(chan struct{})
	go func() {
		defer close(pgDone)
		pg, pgErr = startPostgres(ctx)
	}()
	zk, zkErr = zktest.Start(ctx, zktest.Options{})
	<-pgDone
	cancel()
	code := m.Run()
	if pg != nil {
		pg.stop()
	}
	if zk != nil {
		if code == 0 {
			if err := zktest.NoSessions(zk.Addr(0), 15*time.Second); err != nil {
				fmt.Fprintln(os.Stderr, "fencing tests:", err)
				code = 1
			}
		}
		zk.Close()
	}
	os.Exit(code)
}

// run numbers the tables and paths of one test binary's run; with the
// start time it keeps -count=2 and reruns against a kept server apart.
var (
	run     = time.Now().UnixNano() % 1e9
	counter atomic.Int64
)

// unique returns a name no other test of any run uses.
func unique(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, run, counter.Add(1))
}

// database is one of the databases the fence is tested on.
type database struct {
	name    string
	dialect fencing.Dialect
	open    func(t *testing.T) *sql.DB
}

var databases = []database{
	{"PostgreSQL", fencing.PostgreSQL, openPostgres},
	{"SQLite", fencing.SQLite, openSQLite},
}

// openPostgres connects to the package's PostgreSQL, skipping the test
// (failing it in CI) when PostgreSQL is not installed.
func openPostgres(t *testing.T) *sql.DB {
	t.Helper()
	zktest.SkipOrFail(t, pgErr)
	db, err := sql.Open("pgx", pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openSQLite opens a new SQLite database in a file of the test's. Writers
// wait for each other's transactions (busy_timeout) rather than fail.
func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fence.db")
	db, err := sql.Open("sqlite", "file:"+p+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newTable creates a fence table and an accounts table, the resource it
// guards, and returns the fence and the accounts table's name.
func newTable(t *testing.T, db *sql.DB, d fencing.Dialect) (*fencing.Table, string) {
	t.Helper()
	ctx := context.Background()
	fence, err := fencing.NewTable(d, unique("fence"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fence.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	accounts := unique("accounts")
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+accounts+" (id TEXT PRIMARY KEY, owner TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return fence, accounts
}

// zkAddrs returns the addresses of the package's ZooKeeper, skipping the
// test (failing it in CI) when there is none.
func zkAddrs(t *testing.T) []string {
	t.Helper()
	zktest.SkipOrFail(t, zkErr)
	return zk.Addrs()
}

// zkSession opens a Session on the package's ZooKeeper (servers: its
// addresses, or a proxy's), closed when the test ends.
func zkSession(t *testing.T, servers []string, opts ...zkrecipes.SessionOption) *zkrecipes.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(20*time.Second))
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, servers, opts...)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
