package fencing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// A Dialect is what [Table] needs to know of a SQL database: how its
// statements number their parameters. The fence's statements are otherwise
// the same on every supported database: CREATE TABLE IF NOT EXISTS, and
// INSERT ... ON CONFLICT ... DO UPDATE ... WHERE (PostgreSQL 9.5 and
// later, SQLite 3.24 and later). Use [PostgreSQL] or [SQLite]; the zero
// Dialect is none (NewTable refuses it). Dialects are comparable.
type Dialect struct {
	name   string
	prefix string // of a numbered parameter
}

var (
	// PostgreSQL numbers parameters $1, $2, ... (the pgx and lib/pq
	// drivers).
	PostgreSQL = Dialect{"PostgreSQL", "$"}
	// SQLite numbers parameters ?1, ?2, ... (the modernc.org/sqlite and
	// mattn/go-sqlite3 drivers).
	SQLite = Dialect{"SQLite", "?"}
)

// Param returns the placeholder of the n-th parameter (from 1) of a
// statement: "$1" in PostgreSQL, "?1" in SQLite.
func (d Dialect) Param(n int) string { return d.prefix + strconv.Itoa(n) }

// String returns the database's name.
func (d Dialect) String() string { return d.name }

// Querier is what a fence runs its statements on: a [*sql.Tx] to make the
// fence part of a write's transaction ([*sql.DB] and [*sql.Conn] have these
// methods too).
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// A Table is a fence table in a SQL database: one row per resource, the
// highest token accepted for it. The table is
//
//	CREATE TABLE IF NOT EXISTS <name> (resource TEXT PRIMARY KEY, token BIGINT NOT NULL)
//
// (the same statement for PostgreSQL and SQLite; [Table.DDL] returns it).
// A Table is safe for concurrent use; it holds no connection.
type Table struct {
	name    string
	dialect Dialect
	ddl     string
	advance string
	highest string
}

// identifier is a table name a Table accepts, optionally with its schema:
// letters, digits and underscores, not starting with a digit.
var identifier = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*\.)?[A-Za-z_][A-Za-z0-9_]*$`)

// NewTable returns the fence table name in a database of dialect d. name
// is a plain SQL identifier, optionally schema-qualified ("fence",
// "app.fence"); it is not quoted, so it follows the database's case rules.
// Nothing is sent to the database: create the table with [Table.Create], or
// run [Table.DDL] with your migrations.
func NewTable(d Dialect, name string) (*Table, error) {
	if d.prefix == "" {
		return nil, errors.New("fencing: NewTable: no dialect (use fencing.PostgreSQL or fencing.SQLite)")
	}
	if !identifier.MatchString(name) {
		return nil, fmt.Errorf("fencing: NewTable: table name %q is not a SQL identifier (letters, digits, _; optionally schema.table)", name)
	}
	p1, p2 := d.Param(1), d.Param(2)
	return &Table{
		name:    name,
		dialect: d,
		ddl:     "CREATE TABLE IF NOT EXISTS " + name + " (resource TEXT PRIMARY KEY, token BIGINT NOT NULL)",
		// The upsert inserts the resource's first token, or raises it to
		// one at least as high; a lower token leaves the row unchanged
		// (and, in PostgreSQL, locked until the transaction ends, as an
		// accepted one is). Rows affected tell which.
		advance: "INSERT INTO " + name + " AS f (resource, token) VALUES (" + p1 + ", " + p2 + ") " +
			"ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE f.token <= excluded.token",
		highest: "SELECT token FROM " + name + " WHERE resource = " + p1,
	}, nil
}

// Name returns the table's name.
func (t *Table) Name() string { return t.name }

// DDL returns the statement that creates the table if it does not exist.
func (t *Table) DDL() string { return t.ddl }

// Create creates the table if it does not exist.
func (t *Table) Create(ctx context.Context, q Querier) error {
	if _, err := q.ExecContext(ctx, t.ddl); err != nil {
		return fmt.Errorf("fencing: create fence table %s: %w", t.name, err)
	}
	return nil
}

// Fence records token as the highest accepted for resource, or refuses it
// with a [*StaleError] if a higher one was recorded: run it in the
// transaction of the write it guards (q a [*sql.Tx]), before the write, and
// roll the transaction back if it fails. It costs one statement, two when
// refused (the second reads the highest token for the error).
//
// Once Fence has accepted a token, the fence row stays locked until the
// transaction ends (in SQLite the whole database is), so a successor's
// Fence waits for this transaction to commit or roll back: the writes of
// successive holders are applied in token order, and a transaction that
// commits has written under a token no lower than any committed before
// it. At isolation levels above PostgreSQL's default READ COMMITTED,
// the successor's transaction fails with a serialization error instead of
// waiting; retry it, its Fence then sees the committed token.
//
// A token equal to the highest is accepted (one holding writes many times);
// a token that is not positive is refused with an error wrapping
// [ErrNoToken].
func (t *Table) Fence(ctx context.Context, q Querier, resource string, token int64) error {
	if err := checkToken(resource, token); err != nil {
		return err
	}
	res, err := q.ExecContext(ctx, t.advance, resource, token)
	if err != nil {
		return fmt.Errorf("fencing: fence %q in %s: %w", resource, t.name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fencing: fence %q in %s: rows affected: %w", resource, t.name, err)
	}
	if n > 0 {
		return nil
	}
	highest, err := t.Highest(ctx, q, resource)
	if err != nil {
		return err
	}
	return &StaleError{Resource: resource, Token: token, Highest: highest}
}

// Highest returns the highest token accepted for resource, 0 if none.
func (t *Table) Highest(ctx context.Context, q Querier, resource string) (int64, error) {
	var token int64
	err := q.QueryRowContext(ctx, t.highest, resource).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("fencing: read the token of %q in %s: %w", resource, t.name, err)
	}
	return token, nil
}

// Write runs write in a transaction of db that first fences resource with
// token ([Table.Fence]), and commits it. If the token is refused, write
// does not run, nothing is written and Write returns the [*StaleError]; if
// write returns an error, the transaction is rolled back and Write returns
// that error. opts are the transaction's options (nil: the driver's
// defaults).
func (t *Table) Write(ctx context.Context, db *sql.DB, opts *sql.TxOptions, resource string, token int64, write func(*sql.Tx) error) error {
	if err := checkToken(resource, token); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("fencing: write %q: begin: %w", resource, err)
	}
	if err := t.Fence(ctx, tx, resource, token); err != nil {
		tx.Rollback()
		return err
	}
	if err := write(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fencing: write %q: commit: %w", resource, err)
	}
	return nil
}

// Store returns the table as a [Store] for a [Guard]: each Advance is a
// transaction of its own on db, so that servers sharing the database share
// what they have seen.
func (t *Table) Store(db *sql.DB) Store { return tableStore{t, db} }

type tableStore struct {
	t  *Table
	db *sql.DB
}

func (s tableStore) Advance(ctx context.Context, resource string, token int64) (int64, error) {
	err := s.t.Write(ctx, s.db, nil, resource, token, func(*sql.Tx) error { return nil })
	var stale *StaleError
	if errors.As(err, &stale) {
		return stale.Highest, nil
	}
	if err != nil {
		return 0, err
	}
	return token, nil
}
