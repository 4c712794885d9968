// GetLockStore: each lease is a GET_LOCK held by a connection of its own,
// taken from the pool while the lease is held; the server frees the lock
// when the connection ends, and ends one idle for wait_timeout (the TTL).

package mysqllease

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// MaxGetLockTTL is the longest TTL of a GetLockStore: wait_timeout's limit
// of a year (in whole seconds).
const MaxGetLockTTL = 365 * 24 * time.Hour

// GetLockStore holds each lease as a GET_LOCK on a dedicated connection,
// with the key's fence in its row. It is safe for concurrent use and does
// not own the *sql.DB: Close ends only the connections it holds.
type GetLockStore struct {
	base
	adoptSQL, clearSQL string
	mu                 sync.Mutex
	leases             map[[2]string]*held // by key and token
	closed             bool
}

// held is one lease's connection.
type held struct {
	mu    sync.Mutex // one statement at a time
	conn  *sql.Conn
	fence uint64
	lock  string
	ttl   time.Duration // the lease's: the least time its statements get
}

func newGetLock(b base) *GetLockStore {
	return &GetLockStore{base: b, leases: make(map[[2]string]*held),
		adoptSQL: b.sql(`UPDATE {T} c SET c.fence = LAST_INSERT_ID(c.fence), c.expires_us = {NOW} + ?, c.holder = ?
	WHERE c.ns = ? AND c.k = ? AND c.token = ? AND ` + b.live + ` AND NOT {BAD}`),
		clearSQL: b.sql(`UPDATE {T} c SET c.token = NULL, c.holder = '', c.expires_us = 0, c.conn = NULL
	WHERE c.ns = ? AND c.k = ? AND c.token = ? AND ` + b.live + ` AND NOT {BAD}`),
	}
}

// glAcquire writes a granted lease into the key's row on the connection
// that now holds its lock: a new fence every time (a bad row fails the guard).
var glAcquire = `INSERT INTO {T} (ns, k, token, holder, fence, expires_us, conn)
VALUES (?, ?, ?, ?, LAST_INSERT_ID(1), {NOW} + ?, CONNECTION_ID())
ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(` + guard("fence + 1") + `), token = VALUES(token), holder = VALUES(holder),
	expires_us = VALUES(expires_us), conn = VALUES(conn)`

// glOwned is true when the row of $ns, $k names $token and this
// connection, which holds the lock $lock, and is not bad.
const glOwned = `ns = ? AND k = ? AND token = ? AND conn = CONNECTION_ID() AND IS_USED_LOCK(?) = CONNECTION_ID() AND NOT {BAD}`

// Caps reports a fixed TTL (the connection's wait_timeout, in whole
// seconds) of at least a second.
func (s *GetLockStore) Caps() driver.Caps {
	return driver.Caps{MinTTL: time.Second, MaxTTL: MaxGetLockTTL, FixedTTL: true}
}

// Acquire takes a connection from the pool, sets its wait_timeout to the
// TTL (rounded up to seconds), tries the key's lock without waiting and,
// granted, writes the lease into the key's row with the next fence. A retry
// by the holding token refreshes its row and keeps its fence.
func (s *GetLockStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if h := s.lookup(r); h != nil && s.Renew(ctx, r) == nil {
		return driver.Grant{Fence: h.fence}, nil // a failed renewal ended the lease: take the key afresh
	}
	h := &held{lock: lockName(s.prefix, r.Key), ttl: r.TTL}
	err := s.on(ctx, h, func(ctx context.Context) (err error) {
		if h.conn, err = s.db.Conn(ctx); err != nil {
			return err
		}
		var got sql.NullInt64
		if err = h.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", h.lock).Scan(&got); err != nil || got.Int64 != 1 {
			return err
		}
		secs := int64((r.TTL + time.Second - 1) / time.Second)
		if _, err = h.conn.ExecContext(ctx, "SET SESSION wait_timeout = ?", secs); err != nil {
			return err
		}
		_, fence, err := exec(ctx, h.conn, s.sql(glAcquire), s.ns, r.Key, r.Token, r.Holder, r.TTL.Microseconds())
		h.fence = uint64(fence)
		return err
	})
	switch {
	case err != nil:
		s.discard(h.conn)
		return driver.Grant{}, opErr("acquire", r.Key, true, err)
	case h.fence == 0: // refused: the connection holds no lock and its settings are the pool's
		_ = h.conn.Close()
		return s.adopt(ctx, r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.discard(h.conn)
		return driver.Grant{}, lease.ErrClosed
	}
	s.leases[[2]string{r.Key, r.Token}] = h
	return driver.Grant{Fence: h.fence}, nil
}

// adopt refreshes the row of r's lease if r.Token holds it through another
// store (a retry after a reconnect), and returns its fence; otherwise it
// describes the holder.
func (s *GetLockStore) adopt(ctx context.Context, r driver.Request) (driver.Grant, error) {
	n, fence, err := exec(ctx, s.db, s.adoptSQL, r.TTL.Microseconds(), r.Holder, s.ns, r.Key, r.Token)
	switch {
	case err != nil:
		return driver.Grant{}, opErr("acquire", r.Key, true, err)
	case n == 0:
		return driver.Grant{}, s.held(ctx, r.Key)
	}
	return driver.Grant{Fence: uint64(fence)}, nil
}

// Renew refreshes r's row on its connection, which keeps the connection,
// and so the lock, alive for another wait_timeout. A failed connection has
// lost the lock.
func (s *GetLockStore) Renew(ctx context.Context, r driver.Request) error {
	return s.markBroken(ctx, "renew", r, s.run(ctx, "renew", r, false,
		`UPDATE {T} SET expires_us = {NOW} + ?, holder = ? WHERE `+glOwned, r.TTL.Microseconds(), r.Holder))
}

// Release clears r's row and gives up the lock on its connection, which
// goes back to the pool with the server's default wait_timeout.
func (s *GetLockStore) Release(ctx context.Context, r driver.Request) error {
	return s.run(ctx, "release", r, true, `UPDATE {T} SET token = NULL, holder = '', expires_us = 0, conn = NULL WHERE `+glOwned)
}

// run runs op's statement q (args, then glOwned's) on r's connection; it
// ends the lease if q changes no row, fails, or release says so.
func (s *GetLockStore) run(ctx context.Context, op string, r driver.Request, release bool, q string, args ...any) error {
	h := s.lookup(r)
	if h == nil && release { // held through another store, or not at all
		n, _, err := exec(ctx, s.db, s.clearSQL, s.ns, r.Key, r.Token)
		return opErr(op, r.Key, n == 1, err)
	} else if h == nil {
		return opErr(op, r.Key, false, nil)
	}
	var n int64
	err := s.on(ctx, h, func(ctx context.Context) error {
		var err error
		n, _, err = exec(ctx, h.conn, s.sql(q), append(args, s.ns, r.Key, r.Token, h.lock)...)
		if err != nil || n == 0 || !release {
			return err
		}
		if _, err = h.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", h.lock); err == nil {
			_, err = h.conn.ExecContext(ctx, "SET SESSION wait_timeout = DEFAULT")
		}
		return err
	})
	if err != nil || n == 0 || release {
		s.mu.Lock()
		delete(s.leases, [2]string{r.Key, r.Token})
		s.mu.Unlock()
		if err != nil || n == 0 {
			s.discard(h.conn) // the server frees the lock, if it still has it
		} else {
			_ = h.conn.Close()
		}
	}
	if err != nil && !release {
		err = fmt.Errorf("%w: the lease's connection failed: %w", lease.ErrNotHeld, err)
	}
	return opErr(op, r.Key, n == 1, err)
}

// lookup returns r's lease, if this store holds it.
func (s *GetLockStore) lookup(r driver.Request) *held {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[[2]string{r.Key, r.Token}]
}

// on runs fn, statements on h's connection, one at a time, with ctx's
// deadline but not its cancellation: the driver cuts the connection of a
// cancelled statement, which would give up the lock. For the same reason a
// statement gets at least the lease's TTL: a renewal slower than the renew
// interval then still keeps the lease (docs/RELIABILITY.md, "Starved CPU").
func (s *GetLockStore) on(ctx context.Context, h *held, fn func(ctx context.Context) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	sctx := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		if least := time.Now().Add(h.ttl); dl.Before(least) {
			dl = least
		}
		sctx, cancel = context.WithDeadline(sctx, dl)
		defer cancel()
	}
	return fn(sctx)
}

// discard closes conn instead of returning it to the pool, which frees its
// locks and forgets its session settings.
func (s *GetLockStore) discard(conn *sql.Conn) {
	if conn != nil {
		_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
		_ = conn.Close()
	}
}

// Break frees key whoever holds it (see breakRow), then ends its holder's
// connection with KILL CONNECTION, which needs the holder's user or the
// CONNECTION ADMIN privilege (SUPER on MariaDB before 10.5). Without it Break
// returns an error, but the break stands: the holder gives the lock up at its
// next renewal, a stuck one when wait_timeout ends its connection. KILL
// returns before the connection's thread has ended and freed the lock: Break
// then waits for the lock on the server (up to 5 s) and gives it up again in
// the same statement, so the key is free when it returns.
func (s *GetLockStore) Break(ctx context.Context, key string) (driver.Entry, error) {
	e, r, err := s.breakRow(ctx, key)
	if err != nil || !r.live || !r.conn.Valid {
		return e, err
	}
	var me *mysql.MySQLError // 1094: the connection has ended already
	var got sql.NullInt64
	if _, err = s.db.ExecContext(ctx, "KILL CONNECTION ?", r.conn.Int64); err == nil || errors.As(err, &me) && me.Number == 1094 {
		lock := lockName(s.prefix, key)
		if err = s.db.QueryRowContext(ctx, "SELECT GET_LOCK(?, 5), RELEASE_LOCK(?)", lock, lock).Scan(&got, new(any)); err == nil && got.Int64 != 1 {
			err = errors.New("its connection did not end within 5s")
		}
	}
	if err != nil {
		return e, fmt.Errorf("mysqllease: break %q: broken, but its holder keeps the lock until its next renewal: %w", key, err)
	}
	return e, nil
}

// Close ends the connections of the leases the store holds, which frees
// their locks (close a Client using the store first). The *sql.DB stays open.
func (s *GetLockStore) Close() error {
	s.mu.Lock()
	s.closed = true
	leases := s.leases
	s.leases = make(map[[2]string]*held)
	s.mu.Unlock()
	for _, h := range leases {
		h.mu.Lock()
		s.discard(h.conn)
		h.mu.Unlock()
	}
	return nil
}
