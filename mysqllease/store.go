// What both stores share (the schema, Migrate, Inspect, errors) and the
// TableStore: each operation one statement on any pooled connection.

package mysqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Store is what both MySQL stores, [TableStore] and [GetLockStore], offer.
type Store interface {
	driver.Store
	driver.Lister
	driver.Breaker
	// Migrate creates the lease table if it does not exist.
	Migrate(ctx context.Context) error
}

// nowUS is the server's clock in µs since the epoch, free of the session's
// time zone (UTC_TIMESTAMP is the statement's start, as NOW is).
const nowUS = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))"

// schemaSQL is the lease table: a key's row is never deleted, so its fence
// only grows. expires_us is µs since the epoch by the server's clock; conn
// the connection holding a GET_LOCK lease; broken the JSON object of a
// Break's tombstones, {token: expiry in µs}.
const schemaSQL = `CREATE TABLE IF NOT EXISTS {T} (
	ns VARBINARY(255) NOT NULL, k VARBINARY(512) NOT NULL, token VARBINARY(255) NULL,
	holder VARBINARY(1024) NOT NULL DEFAULT '', fence BIGINT UNSIGNED NOT NULL, expires_us BIGINT NOT NULL DEFAULT 0,
	conn BIGINT UNSIGNED NULL, broken TEXT NULL, PRIMARY KEY (ns, k)) ENGINE=InnoDB`

// base is what both stores share: the statements over the key's row c,
// whose live hold LIVE judges.
type base struct {
	db                            *sql.DB
	ns, table, prefix, live       string
	inspectSQL, pageSQL, breakSQL string
}

// badSQL is true when the key's row holds what no statement of ours writes:
// a fence outside 1..MaxInt64 (no count from 1 gets past it, and fenced
// resources' BIGINTs could not take it: fence/sqlfence), an empty
// token, an expiry before the epoch or past the longest TTL from now (a
// time.Duration's µs). Its columns are unqualified: it reads the row in ON
// DUPLICATE KEY UPDATE too.
const badSQL = `(fence NOT BETWEEN 1 AND 9223372036854775807 OR token <=> '' OR expires_us NOT BETWEEN 0 AND ` + nowUS + ` + 9223372036854775)`

// guard is expr, unless the row is bad or at the last fence (it has no
// successor): then it fails the statement, before any change, with error
// 1690 (a value out of range), which corrupt maps to lease.ErrCorrupt.
func guard(expr string) string {
	return "IF(" + badSQL + " OR fence = 9223372036854775807, fence + 18446744073709551615 + 1, " + expr + ")"
}

func newBase(db *sql.DB, c config, table string) base {
	live := "(c.token IS NOT NULL AND c.expires_us > " + nowUS + ")"
	prefix := table + "\x00" + c.ns + "\x00"
	if c.mode == ModeGetLock { // a row without a connection (table mode's) is free
		live = "(c.token IS NOT NULL AND IS_USED_LOCK(" + lockNameSQL(prefix) + ") = c.conn)"
	}
	r := strings.NewReplacer("{T}", table, "{NOW}", nowUS, "{LIVE}", live, "{BAD}", badSQL)
	row := `COALESCE({LIVE}, false), c.token, c.holder, c.fence, GREATEST(c.expires_us - {NOW}, 0), c.conn, c.broken, {NOW}, {BAD}`
	return base{
		db: db, ns: c.ns, table: table, prefix: prefix, live: live,
		inspectSQL: r.Replace(`SELECT ` + row + ` FROM {T} c WHERE c.ns = ? AND c.k = ?`),
		pageSQL: r.Replace(`SELECT c.k, ` + row + ` FROM {T} c WHERE c.ns = ? AND c.k > ? AND c.k >= ?
	AND (? OR c.k < ?) ORDER BY c.k LIMIT ?`),
		breakSQL: r.Replace(`UPDATE {T} SET token = NULL, holder = '', expires_us = 0, conn = NULL, broken = ? WHERE ns = ? AND k = ?`),
	}
}

// sql fills the table, the server's clock, LIVE and BAD into a statement.
func (b *base) sql(s string) string {
	return strings.NewReplacer("{T}", b.table, "{NOW}", nowUS, "{LIVE}", b.live, "{BAD}", badSQL).Replace(s)
}

// Migrate creates the lease table if it does not exist.
func (b *base) Migrate(ctx context.Context) error {
	if _, err := b.db.ExecContext(ctx, b.sql(schemaSQL)); err != nil {
		return fmt.Errorf("mysqllease: migrate %s: %w", b.table, err)
	}
	return nil
}

// row is a key's row as the statements of base read it.
type row struct {
	token, holder, broken sql.NullString
	live, bad             bool
	fence                 uint64
	us, now               int64
	conn                  sql.NullInt64
}

func (r *row) dest() []any {
	return []any{&r.live, &r.token, &r.holder, &r.fence, &r.us, &r.conn, &r.broken, &r.now, &r.bad}
}

// check returns an error matching lease.ErrCorrupt if the row is bad.
func (r *row) check(op, key string) error {
	if r.bad {
		return fmt.Errorf("mysqllease: %s %q: %w: a row we did not write (fence %d, token %q)",
			op, key, lease.ErrCorrupt, r.fence, r.token.String)
	}
	return nil
}

// Inspect reports who holds key; for a free key, Fence is the last granted.
func (b *base) Inspect(ctx context.Context, key string) (driver.Info, error) {
	var r row
	err := b.db.QueryRowContext(ctx, b.inspectSQL, b.ns, key).Scan(r.dest()...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return driver.Info{Key: key}, nil
	case err != nil:
		return driver.Info{}, opErr("inspect", key, true, err)
	case r.bad:
		return driver.Info{}, r.check("inspect", key)
	case !r.live:
		return driver.Info{Key: key, Fence: r.fence}, nil
	}
	return driver.Info{Key: key, Held: true, Holder: r.holder.String, Fence: r.fence, Remaining: time.Duration(r.us) * time.Microsecond}, nil
}

// held returns the *lease.HeldError of a refused acquisition of key, or
// the error of the Inspect that describes its holder.
func (b *base) held(ctx context.Context, key string) error {
	info, err := b.Inspect(ctx, key)
	if err != nil {
		return err
	}
	return &lease.HeldError{Key: key, Holder: info.Holder, Fence: info.Fence, Remaining: info.Remaining}
}

// execer is a *sql.DB, *sql.Conn or *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// exec runs q and returns the rows it changed and the LAST_INSERT_ID it
// set (the driver's results never fail).
func exec(ctx context.Context, e execer, q string, args ...any) (n, id int64, err error) {
	res, err := e.ExecContext(ctx, q, args...)
	if err == nil {
		n, _ = res.RowsAffected()
		id, _ = res.LastInsertId()
	}
	return n, id, err
}

// opErr is op's error on key: err, or lease.ErrNotHeld if !held.
func opErr(op, key string, held bool, err error) error {
	if err == nil && held {
		return nil
	} else if err == nil {
		err = lease.ErrNotHeld
	}
	return fmt.Errorf("mysqllease: %s %q: %w", op, key, corrupt(err))
}

// corrupt wraps lease.ErrCorrupt into err if it is error 1690, a value out
// of range: a guard, or arithmetic on a row we did not write.
func corrupt(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1690 {
		return fmt.Errorf("%w: a row we did not write: %w", lease.ErrCorrupt, err)
	}
	return err
}

// TableStore keeps each lease as a row of the lease table, live until its
// expiry by the server's clock. It is safe for concurrent use and does not
// own the *sql.DB.
type TableStore struct{ base }

// tableAcquire takes the row when it is free, expired or already $token's
// (a retry keeps the fence), in one upsert whose assignments run left to
// right, each reading the row as the previous ones left it: the fence and
// holder first, the token next, the expiry last (set when the token is now
// ours). LAST_INSERT_ID(fence) hands the fence to the client; the affected
// rows say whether the row was granted (0: held by another). A bad row
// fails the guard.
var tableAcquire = `INSERT INTO {T} (ns, k, token, holder, fence, expires_us) VALUES (?, ?, ?, ?, LAST_INSERT_ID(1), {NOW} + ?)
ON DUPLICATE KEY UPDATE
	fence = LAST_INSERT_ID(` + guard(`IF(token IS NULL OR expires_us <= {NOW}, fence + 1, fence)`) + `),
	holder = IF(token IS NULL OR expires_us <= {NOW} OR token = VALUES(token), VALUES(holder), holder),
	token = IF(token IS NULL OR expires_us <= {NOW}, VALUES(token), token),
	expires_us = IF(token = VALUES(token), VALUES(expires_us), expires_us)`

// Caps reports the Client's own limits: no FIFO queue, no shared holds.
func (s *TableStore) Caps() driver.Caps { return driver.Caps{} }

// Acquire takes r.Key for r.Token in one statement; a refusal reads the
// holder with a second.
func (s *TableStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	n, fence, err := exec(ctx, s.db, s.sql(tableAcquire), s.ns, r.Key, r.Token, r.Holder, r.TTL.Microseconds())
	switch {
	case err != nil:
		return driver.Grant{}, opErr("acquire", r.Key, true, err)
	case n == 0:
		return driver.Grant{}, s.held(ctx, r.Key)
	}
	return driver.Grant{Fence: uint64(fence)}, nil
}

// Renew extends r.Key to r.TTL from now if r.Token holds it.
func (s *TableStore) Renew(ctx context.Context, r driver.Request) error {
	return s.update(ctx, "renew", r, `UPDATE {T} SET expires_us = {NOW} + ? WHERE ns = ? AND k = ? AND token = ? AND expires_us > {NOW} AND NOT {BAD}`,
		r.TTL.Microseconds(), s.ns, r.Key, r.Token)
}

// Release frees r.Key if r.Token holds it, keeping the fence.
func (s *TableStore) Release(ctx context.Context, r driver.Request) error {
	return s.update(ctx, "release", r, `UPDATE {T} SET token = NULL, holder = '', expires_us = 0
	WHERE ns = ? AND k = ? AND token = ? AND expires_us > {NOW} AND NOT {BAD}`, s.ns, r.Key, r.Token)
}

// update runs op's statement q, which changes one row if r holds its key.
func (s *TableStore) update(ctx context.Context, op string, r driver.Request, q string, args ...any) error {
	n, _, err := exec(ctx, s.db, s.sql(q), args...)
	return s.markBroken(ctx, op, r, opErr(op, r.Key, n == 1, err))
}

// Close does nothing: the store holds no resources of its own.
func (s *TableStore) Close() error { return nil }
