package sqlfence_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence/internal/fencetest"
	"github.com/leasekit/lease/fence/sqlfence"
	"github.com/leasekit/lease/leasetest"
)

// server is a database under test and a fenced table made on it.
type server struct {
	db    *sql.DB
	d     sqlfence.Dialect
	table *sqlfence.Table
	q     func(string) string // quotes the table's name into a statement's T
}

// dialects returns the servers to test: PostgreSQL (pgx's stdlib) and
// MariaDB/MySQL (go-sql-driver/mysql).
func dialects() []struct {
	name, driver, env string
	d                 sqlfence.Dialect
	quote             string
} {
	return []struct {
		name, driver, env string
		d                 sqlfence.Dialect
		quote             string
	}{
		{"Postgres", "pgx", "LEASE_TEST_POSTGRES_DSN", sqlfence.Postgres, `"`},
		{"MySQL", "mysql", "LEASE_TEST_MYSQL_DSN", sqlfence.MySQL, "`"},
	}
}

// newServer opens the database and creates a table whose name needs quoting
// in both dialects, dropped when the test ends.
func newServer(t *testing.T, driver, dsn string, d sqlfence.Dialect, quote string) *server {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { _ = db.Close() })
	name := "sqlfence \"odd` " + randHex(4)
	quoted := quote + strings.ReplaceAll(name, quote, quote+quote) + quote
	q := func(s string) string { return strings.ReplaceAll(s, " T ", " "+quoted+" ") }
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, q("CREATE TABLE T (id VARCHAR(64) PRIMARY KEY, lock_version BIGINT NOT NULL, value TEXT NOT NULL)")); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.WithoutCancel(ctx), q("DROP TABLE T")) })
	table, err := sqlfence.NewTable(d, name, "id", "lock_version")
	if err != nil {
		t.Fatalf("NewTable: %v", err)
	}
	return &server{db: db, d: d, table: table, q: q}
}

// row inserts a fresh row (fence 0) and returns its id.
func (s *server) row(t *testing.T) string {
	id := randHex(8)
	if _, err := s.db.ExecContext(context.Background(), s.q("INSERT INTO T (id, lock_version, value) VALUES ("+s.ph(1)+", 0, "+s.ph(2)+")"), id, ""); err != nil {
		t.Fatalf("insert: %v", err)
	}
	return id
}

// ph returns the i-th placeholder (from 1).
func (s *server) ph(i int) string {
	if s.d == sqlfence.Postgres {
		return "$" + strconv.Itoa(i)
	}
	return "?"
}

func (s *server) read(id string) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (v string, err error) {
		err = s.db.QueryRowContext(ctx, s.q("SELECT value FROM T WHERE id = "+s.ph(1)), id).Scan(&v)
		return v, err
	}
}

// TestFencedWrites runs the fenced-write scenario over Update and Tx on
// PostgreSQL and MariaDB/MySQL.
func TestFencedWrites(t *testing.T) {
	for _, c := range dialects() {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, c.driver, leasetest.Env(t, c.env), c.d, c.quote)
			t.Run("Update", func(t *testing.T) {
				fencetest.Run(t, func(t *testing.T) fencetest.Resource {
					id := s.row(t)
					return fencetest.Resource{Read: s.read(id), Write: func(ctx context.Context, fence uint64, v string) error {
						return s.table.Update(ctx, s.db, id, fence, sqlfence.Set{"value": v})
					}}
				})
			})
			t.Run("Tx", func(t *testing.T) {
				set := s.q("UPDATE T SET value = " + s.ph(1) + " WHERE id = " + s.ph(2))
				fencetest.Run(t, func(t *testing.T) fencetest.Resource {
					id := s.row(t)
					return fencetest.Resource{Read: s.read(id), Write: func(ctx context.Context, fence uint64, v string) error {
						return s.table.Tx(ctx, s.db, id, fence, func(ctx context.Context, tx *sql.Tx) error {
							_, err := tx.ExecContext(ctx, set, v, id)
							return err
						})
					}}
				})
			})
			t.Run("Edges", func(t *testing.T) { edges(t, s) })
		})
	}
}

// edges: a write that changes nothing (MySQL reports no affected row) is
// accepted; a missing row, a fence above BIGINT and bad names are errors.
func edges(t *testing.T, s *server) {
	ctx := context.Background()
	id := s.row(t)
	for range 2 {
		if err := s.table.Update(ctx, s.db, id, 5, sqlfence.Set{"value": "same"}); err != nil {
			t.Fatalf("Update writing what the row holds: %v", err)
		}
	}
	if err := s.table.Update(ctx, s.db, "missing", 5, sqlfence.Set{"value": "x"}); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("Update of a missing row: %v, want sql.ErrNoRows", err)
	}
	ran := false
	err := s.table.Tx(ctx, s.db, "missing", 5, func(context.Context, *sql.Tx) error { ran = true; return nil })
	if !errors.Is(err, sql.ErrNoRows) || ran {
		t.Fatalf("Tx on a missing row: %v (fn ran: %v), want sql.ErrNoRows", err, ran)
	}
	if err := s.table.Update(ctx, s.db, id, math.MaxInt64+1, sqlfence.Set{"value": "x"}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("Update with a fence above BIGINT: %v, want ErrInvalid", err)
	}
	if err := s.table.Update(ctx, s.db, id, 6, sqlfence.Set{"": "x"}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("Update of an empty column name: %v, want ErrInvalid", err)
	}
	if _, err := sqlfence.NewTable(s.d, "a..b", "id", "v"); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("NewTable with an empty name part: %v, want ErrInvalid", err)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
