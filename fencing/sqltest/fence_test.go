package sqltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fencing"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// setOwner is the guarded write of these tests: account id's owner.
func setOwner(ctx context.Context, d fencing.Dialect, accounts, id, owner string) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO "+accounts+" (id, owner) VALUES ("+d.Param(1)+", "+d.Param(2)+") "+
			"ON CONFLICT (id) DO UPDATE SET owner = excluded.owner", id, owner)
		return err
	}
}

func owner(t *testing.T, db *sql.DB, accounts, id string) string {
	t.Helper()
	var o string
	if err := db.QueryRow("SELECT owner FROM " + accounts + " WHERE id = '" + id + "'").Scan(&o); err != nil {
		t.Fatalf("read %s's owner: %v", id, err)
	}
	return o
}

// TestTableFence: a write with a token lower than the highest accepted
// for its resource is refused with a StaleError and changes nothing; an
// equal or higher token is accepted; resources are fenced apart; a failed
// write leaves the fence as it was; no token is refused.
func TestTableFence(t *testing.T) {
	for _, dbase := range databases {
		t.Run(dbase.name, func(t *testing.T) {
			zktest.CheckLeaks(t)
			ctx := context.Background()
			db := dbase.open(t)
			fence, accounts := newTable(t, db, dbase.dialect)
			write := func(token int64, who string) error {
				return fence.Write(ctx, db, nil, "acct-1", token, setOwner(ctx, dbase.dialect, accounts, "acct-1", who))
			}
			for _, w := range []struct {
				token int64
				who   string
			}{{5, "A"}, {5, "A again"}, {7, "B"}} {
				if err := write(w.token, w.who); err != nil {
					t.Fatalf("write %q with token %d: %v", w.who, w.token, err)
				}
			}
			err := write(5, "A late")
			var stale *fencing.StaleError
			if !errors.As(err, &stale) || !errors.Is(err, fencing.ErrStale) || *stale != (fencing.StaleError{Resource: "acct-1", Token: 5, Highest: 7}) {
				t.Fatalf("late write with token 5 after 7: %v, want a StaleError{acct-1 5 7}", err)
			}
			if o := owner(t, db, accounts, "acct-1"); o != "B" {
				t.Fatalf("owner after the refused write: %q, want B", o)
			}
			if h, err := fence.Highest(ctx, db, "acct-1"); err != nil || h != 7 {
				t.Fatalf("Highest = %d, %v; want 7", h, err)
			}

			// A failed write is rolled back, its fence too.
			boom := errors.New("boom")
			if err := fence.Write(ctx, db, nil, "acct-1", 9, func(*sql.Tx) error { return boom }); !errors.Is(err, boom) {
				t.Fatalf("write failing with boom: %v", err)
			}
			if h, err := fence.Highest(ctx, db, "acct-1"); err != nil || h != 7 {
				t.Fatalf("Highest after a failed write with 9 = %d, %v; want 7 still", h, err)
			}

			// Another resource has a fence of its own.
			if err := fence.Write(ctx, db, nil, "acct-2", 3, setOwner(ctx, dbase.dialect, accounts, "acct-2", "C")); err != nil {
				t.Fatalf("write acct-2 with token 3: %v", err)
			}
			if h, err := fence.Highest(ctx, db, "nothing"); err != nil || h != 0 {
				t.Fatalf("Highest of a resource never fenced = %d, %v; want 0", h, err)
			}
			for _, tok := range []int64{0, -1} {
				if err := write(tok, "nobody"); !errors.Is(err, fencing.ErrNoToken) {
					t.Fatalf("write with token %d: %v, want ErrNoToken", tok, err)
				}
			}

			// Fence in a transaction of the caller's.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := fence.Fence(ctx, tx, "acct-1", 6); !errors.Is(err, fencing.ErrStale) {
				t.Fatalf("Fence with 6 after 7: %v, want ErrStale", err)
			}
			if err := fence.Fence(ctx, tx, "acct-1", 8); err != nil {
				t.Fatalf("Fence with 8 after 7: %v", err)
			}
		})
	}
}

// TestTableFenceWaitsForHolder: on PostgreSQL a successor's Fence waits for
// the transaction of the holder whose token the fence accepted, so that
// the successor's write lands after it, never under it.
func TestTableFenceWaitsForHolder(t *testing.T) {
	zktest.CheckLeaks(t)
	ctx := context.Background()
	db := openPostgres(t)
	fence, accounts := newTable(t, db, fencing.PostgreSQL)

	txA, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer txA.Rollback()
	if err := fence.Fence(ctx, txA, "acct", 5); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan error, 1)
	go func() {
		bDone <- fence.Write(ctx, db, nil, "acct", 7, setOwner(ctx, fencing.PostgreSQL, accounts, "acct", "B"))
	}()
	// B is seen waiting for A's row lock before A writes.
	zktest.Eventually(t, zktest.Bound(10*time.Second), "B waits for A's lock", func() error {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO "+fence.Name()+"%'").Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d sessions wait for a lock on the fence", n)
		}
		return nil
	})
	if err := setOwner(ctx, fencing.PostgreSQL, accounts, "acct", "A")(txA); err != nil {
		t.Fatal(err)
	}
	if err := txA.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("B's write after A committed: %v", err)
	}
	if o := owner(t, db, accounts, "acct"); o != "B" {
		t.Fatalf("owner: %q, want B (written after A)", o)
	}
}

// TestRowGuard: the guard on the row itself that docs/fencing.md shows,
// a token column compared in the UPDATE, refuses a lower token on both
// databases (0 rows affected) and accepts an equal one.
func TestRowGuard(t *testing.T) {
	for _, dbase := range databases {
		t.Run(dbase.name, func(t *testing.T) {
			zktest.CheckLeaks(t)
			ctx := context.Background()
			db := dbase.open(t)
			_, accounts := newTable(t, db, dbase.dialect)
			if _, err := db.ExecContext(ctx, "ALTER TABLE "+accounts+" ADD COLUMN fence_token BIGINT NOT NULL DEFAULT 0"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO "+accounts+" (id, owner) VALUES ('acct', 'nobody')"); err != nil {
				t.Fatal(err)
			}
			p := dbase.dialect.Param
			update := "UPDATE " + accounts + " SET owner = " + p(1) + ", fence_token = " + p(2) + " WHERE id = " + p(3) + " AND fence_token <= " + p(2)
			for _, w := range []struct {
				token int64
				who   string
				rows  int64
			}{{5, "A", 1}, {5, "A again", 1}, {7, "B", 1}, {5, "A late", 0}} {
				res, err := db.ExecContext(ctx, update, w.who, w.token, "acct")
				if err != nil {
					t.Fatal(err)
				}
				if n, err := res.RowsAffected(); err != nil || n != w.rows {
					t.Fatalf("%s with token %d: %d rows, %v; want %d", w.who, w.token, n, err, w.rows)
				}
			}
			if o := owner(t, db, accounts, "acct"); o != "B" {
				t.Fatalf("owner: %q, want B", o)
			}
		})
	}
}

// TestTableFenceConcurrent: writers with tokens 1..8 race; each is
// accepted or refused below a higher token, the highest always wins, and
// the accepted writes were applied in token order (a log appended in each
// write's transaction has non-decreasing tokens): the fence serializes
// the transactions it accepts.
func TestTableFenceConcurrent(t *testing.T) {
	for _, dbase := range databases {
		t.Run(dbase.name, func(t *testing.T) {
			zktest.CheckLeaks(t)
			ctx := context.Background()
			db := dbase.open(t)
			fence, accounts := newTable(t, db, dbase.dialect)
			log := unique("log")
			id := "id BIGSERIAL PRIMARY KEY"
			if dbase.dialect == fencing.SQLite {
				id = "id INTEGER PRIMARY KEY"
			}
			if _, err := db.ExecContext(ctx, "CREATE TABLE "+log+" ("+id+", token BIGINT NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			const n = 8
			errs := make(chan error, n)
			for i := range n {
				go func() {
					token := int64(i + 1)
					err := fence.Write(ctx, db, nil, "acct", token, func(tx *sql.Tx) error {
						if err := setOwner(ctx, dbase.dialect, accounts, "acct", fmt.Sprint(token))(tx); err != nil {
							return err
						}
						_, err := tx.ExecContext(ctx, "INSERT INTO "+log+" (token) VALUES ("+dbase.dialect.Param(1)+")", token)
						return err
					})
					var stale *fencing.StaleError
					if errors.As(err, &stale) && stale.Highest > token {
						err = nil
					}
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			if o := owner(t, db, accounts, "acct"); o != fmt.Sprint(n) {
				t.Errorf("owner: %q, want %d, the highest token's", o, n)
			}
			rows, err := db.QueryContext(ctx, "SELECT token FROM "+log+" ORDER BY id")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var applied []int64
			for rows.Next() {
				var tok int64
				if err := rows.Scan(&tok); err != nil {
					t.Fatal(err)
				}
				applied = append(applied, tok)
			}
			if !slices.IsSorted(applied) || len(applied) == 0 || applied[len(applied)-1] != n {
				t.Errorf("writes applied in the order %v, want increasing tokens ending with %d", applied, n)
			}
		})
	}
}
