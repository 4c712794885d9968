// Table: the fenced table's statements, per dialect, and the three writes.

package sqlfence

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/leasekit/lease"
)

// Dialect says how a database quotes identifiers and numbers placeholders.
type Dialect int

const (
	// Postgres quotes "names" and numbers placeholders $1, $2, ...
	Postgres Dialect = iota + 1
	// MySQL (and MariaDB) quotes `names` and uses ? placeholders.
	MySQL
)

// Set maps column names to the values an Update writes.
type Set map[string]any

// Querier is what Update runs on: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Table is a table whose rows each keep the largest fence they accepted.
type Table struct {
	d                Dialect
	name             string // as given, for errors
	table, id, fence string // quoted
	lockSQL, readSQL string
	raiseSQL         string
}

// NewTable returns the table name (schema-qualified with a dot if need be)
// whose rows are identified by idColumn and keep their fence in fenceColumn.
func NewTable(d Dialect, name, idColumn, fenceColumn string) (*Table, error) {
	if d != Postgres && d != MySQL {
		return nil, fmt.Errorf("sqlfence: %w", lease.Invalid("dialect", "%d", d))
	}
	names := append(strings.Split(name, "."), idColumn, fenceColumn)
	q := make([]string, len(names))
	for i, n := range names {
		var err error
		if q[i], err = d.quote(n); err != nil {
			return nil, err
		}
	}
	n := len(q) - 2
	t := &Table{d: d, name: name, table: strings.Join(q[:n], "."), id: q[n], fence: q[n+1]}
	where := " FROM " + t.table + " WHERE " + t.id + " = " + d.arg(1)
	t.readSQL = "SELECT " + t.fence + where
	t.lockSQL = t.readSQL + " FOR UPDATE"
	t.raiseSQL = "UPDATE " + t.table + " SET " + t.fence + " = " + d.arg(1) + " WHERE " + t.id + " = " + d.arg(2)
	return t, nil
}

// quote returns name as a quoted identifier.
func (d Dialect) quote(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) || !utf8.ValidString(name) {
		return "", fmt.Errorf("sqlfence: %w", lease.Invalid("identifier", "%q", name))
	}
	q := `"`
	if d == MySQL {
		q = "`"
	}
	return q + strings.ReplaceAll(name, q, q+q) + q, nil
}

// arg returns the i-th placeholder (from 1).
func (d Dialect) arg(i int) string {
	if d == MySQL {
		return "?"
	}
	return "$" + strconv.Itoa(i)
}

// Claim locks row id in tx (SELECT … FOR UPDATE) and raises its fence to
// fence, unless the row holds a larger one: then it returns a
// *lease.StaleFenceError. The row stays locked until tx ends, so the writes
// tx makes after Claim are fenced: no other Claim or Update on the row passes
// before tx commits, and after that only with a fence at least this one.
func (t *Table) Claim(ctx context.Context, tx *sql.Tx, id any, fence uint64) error {
	f, err := t.check(fence)
	if err != nil {
		return err
	}
	var stored int64
	if err := tx.QueryRowContext(ctx, t.lockSQL, id).Scan(&stored); err != nil {
		return fmt.Errorf("sqlfence: claim %s: %w", t.row(id), err)
	}
	switch {
	case stored > f:
		return t.stale(id, fence, stored)
	case stored < f:
		if _, err := tx.ExecContext(ctx, t.raiseSQL, f, id); err != nil {
			return fmt.Errorf("sqlfence: claim %s: %w", t.row(id), err)
		}
	}
	return nil
}

// Tx runs fn in a transaction of db that first Claims row id with fence,
// and commits it if fn returns nil. fn does not run if the claim fails.
func (t *Table) Tx(ctx context.Context, db *sql.DB, id any, fence uint64, fn func(ctx context.Context, tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := t.Claim(ctx, tx, id, fence); err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: commit %s: %w", t.row(id), err)
	}
	return nil
}

// Update sets the columns of row id to set's values and its fence to fence,
// in one statement that matches the row only if its fence is at most fence
// (UPDATE … WHERE fence <= $fence). A refused write returns a
// *lease.StaleFenceError; a missing row an error matching sql.ErrNoRows.
func (t *Table) Update(ctx context.Context, q Querier, id any, fence uint64, set Set) error {
	f, err := t.check(fence)
	if err != nil {
		return err
	}
	cols := make([]string, 0, len(set))
	for c := range set {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	var b strings.Builder
	args := make([]any, 0, len(set)+3)
	b.WriteString("UPDATE " + t.table + " SET ")
	for _, c := range cols {
		qc, err := t.d.quote(c)
		if err != nil {
			return err
		}
		args = append(args, set[c])
		b.WriteString(qc + " = " + t.d.arg(len(args)) + ", ")
	}
	args = append(args, f, id, f)
	fmt.Fprintf(&b, "%s = %s WHERE %s = %s AND %s <= %s", t.fence, t.d.arg(len(args)-2),
		t.id, t.d.arg(len(args)-1), t.fence, t.d.arg(len(args)))
	res, err := q.ExecContext(ctx, b.String(), args...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return fmt.Errorf("sqlfence: update %s: %w", t.row(id), err)
	}
	if n > 0 {
		return nil
	}
	return t.explain(ctx, q, id, fence)
}

// explain says why an Update matched no row, from the row's fence now.
// MySQL counts only changed rows: an equal fence with equal values matched.
func (t *Table) explain(ctx context.Context, q Querier, id any, fence uint64) error {
	var stored int64
	if err := q.QueryRowContext(ctx, t.readSQL, id).Scan(&stored); err != nil {
		return fmt.Errorf("sqlfence: update %s: %w", t.row(id), err)
	}
	switch {
	case stored > int64(fence):
		return t.stale(id, fence, stored)
	case stored == int64(fence) && t.d == MySQL:
		return nil
	}
	return fmt.Errorf("sqlfence: update %s: no row matched, its fence is now %d: changed concurrently", t.row(id), stored)
}

// check returns fence as a BIGINT.
func (t *Table) check(fence uint64) (int64, error) {
	if fence > math.MaxInt64 {
		return 0, fmt.Errorf("sqlfence: %w", lease.Invalid("fence", "%d does not fit a BIGINT", fence))
	}
	return int64(fence), nil
}

func (t *Table) row(id any) string { return fmt.Sprintf("%s row %v", t.name, id) }

func (t *Table) stale(id any, fence uint64, stored int64) error {
	return fmt.Errorf("sqlfence: %w", &lease.StaleFenceError{Resource: t.row(id), Fence: fence, Stored: uint64(stored)})
}
