// AdvisoryStore: each lease is a session-level advisory lock. The leases of
// one TTL share one dedicated connection (a server session taken out of the
// pool) while any of them is held; the server frees the locks when the
// session ends, and ends a session idle for the TTL.

package pglease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// MaxAdvisoryTTL is the longest TTL of an AdvisoryStore:
// idle_session_timeout is a 32-bit number of milliseconds.
const MaxAdvisoryTTL = (1<<31 - 1) * time.Millisecond

// ErrPooler is wrapped in the error of a statement that ran in another
// server session than the one holding its locks: the pool goes through a
// transaction-mode pooler, which an AdvisoryStore cannot work behind.
var ErrPooler = errors.New("pglease: the lease's statements ran in a different server session: " +
	"advisory locks need session pooling (not pgbouncer pool_mode=transaction or statement)")

// AdvisoryStore holds each lease as a session-level advisory lock. It is
// safe for concurrent use and does not own the pool: Close closes only the
// connections it took out of it.
type AdvisoryStore struct {
	base
	acquireSQL, renewSQL, releaseSQL, leaveSQL string
	mixedSQL, rReleaseSQL, rLeaveSQL, infoSQL  string // renewals with readers, a reader's release and leave; Inspect

	mu       sync.Mutex
	sessions map[int64]*session // by TTL in ms
	idle     []*pgx.Conn
	closed   bool
}

// session is a dedicated connection holding the locks of one TTL's leases.
type session struct {
	mu    sync.Mutex // one statement at a time
	conn  *pgx.Conn
	ttlMs int64
	pid   int32                      // the server process, from the first statement (under mu)
	held  map[string]map[string]bool // shared by token by key; written under both mus
	users int                        // under AdvisoryStore.mu
}

// lockers selects the processes granted the advisory lock ($i class, $i+1
// object) in this database, matching cond.
func lockers(i int, cond string) string {
	return fmt.Sprintf(`SELECT k.pid FROM pg_locks k WHERE k.locktype = 'advisory' AND k.granted AND %s
	AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND k.classid = $%d::int4::oid AND k.objid = $%d::int4::oid AND k.objsubid = 2`, cond, i, i+1)
}

// lockHeld is true when a session matching cond holds the lock.
func lockHeld(i int, cond string) string { return "EXISTS (" + lockers(i, cond) + ")" }

// advisoryLive: row c names a writer whose session holds the lock.
func advisoryLive(i int) string {
	return "c.token IS NOT NULL AND " + lockHeld(i, "k.pid = c.pid AND k.mode = 'ExclusiveLock'")
}

// Readers: a row's readers map each reader's token to [expiry in µs since
// the epoch, holder, server process] (table mode's entries, and the process);
// advisoryReader is true when entry e's process holds the lock shared (the
// lock's holders read once per statement, not once per entry).
func advisoryReader(i int) string {
	return "(e.value->>2)::int IN (" + lockers(i, "k.mode = 'ShareLock'") + ")"
}

// readersOf counts the live readers (READER) of row c, with one's holder
// and the last expiry.
const readersOf = `SELECT count(*) AS n, min(e.value->>1) AS holder,
	timestamptz 'epoch' + max((e.value->>0)::int8) * interval '1 microsecond' AS expires_at
	FROM jsonb_each(c.readers) e WHERE READER`

// nowUS is the server's clock in µs since the epoch.
const nowUS = `(extract(epoch FROM clock_timestamp()) * 1000000)::int8`

// advisoryAcquire: $8 class, $9 object, $10 TTL in ms, $11 may try the lock
// (session.mayTry), $12 shared. Only a token with no waiter ahead (for a
// reader: no writer ahead) tries it, unless it holds it (o: a retry, granted
// as it is). A writer then gets the row and fence+1; a reader gets an entry
// in its readers, and fence+1 unless other live readers (OTHERS, of the row's
// latest version, which the upsert locks) hold. The session gets
// idle_session_timeout = TTL and TCP settings that drop a vanished peer.
const advisoryAcquire = `WITH ` + liveQueue + `,
ahx AS (SELECT CASE WHEN $12::bool THEN (SELECT count(*) FROM q WHERE NOT shared AND seq < COALESCE(
	(SELECT seq FROM q WHERE token = $3), 9223372036854775807)) ELSE (SELECT n FROM ah) END AS n),
o AS MATERIALIZED (SELECT EXISTS (SELECT 1 FROM T c WHERE c.ns = $1 AND c.key = $2 AND CASE WHEN $12
	THEN EXISTS (SELECT 1 FROM jsonb_each(c.readers) e WHERE e.key = $3 AND READER) ELSE c.token = $3 AND LIVE END) AS ours),
l AS MATERIALIZED (SELECT ok, CASE WHEN ok THEN set_config('idle_session_timeout', $10::int8::text, false)
		|| set_config('tcp_keepalives_idle', (($10::int8 + 999) / 1000)::text, false) || set_config('tcp_keepalives_interval', '1', false)
		|| set_config('tcp_keepalives_count', '1', false) || set_config('tcp_user_timeout', ($10::int8 + 1000)::text, false) END AS s
	FROM (SELECT CASE WHEN NOT ($11::bool AND (SELECT n FROM ahx) = 0 AND NOT (SELECT ours FROM o)) THEN false
		WHEN $12 THEN pg_try_advisory_lock_shared($8, $9) ELSE pg_try_advisory_lock($8, $9) END AS ok) t),
acq AS (
	INSERT INTO T AS r (ns, key, token, holder, fence, expires_at, pid, readers)
	SELECT $1, $2, $3, $4, 1, clock_timestamp() + $5::float8 * interval '1 microsecond', pg_backend_pid(), NULL::jsonb
	FROM l WHERE l.ok AND NOT $12
	UNION ALL SELECT $1, $2, NULL, '', 1, NULL, NULL, jsonb_build_object($3::text,
		jsonb_build_array(` + nowUS + ` + $5::float8::int8, $4::text, pg_backend_pid())) FROM l WHERE l.ok AND $12
	ON CONFLICT (ns, key) DO UPDATE SET token = excluded.token, holder = excluded.holder,
		expires_at = excluded.expires_at, pid = excluded.pid, readers = COALESCE(OTHERS, '{}') || excluded.readers,
		fence = r.fence + CASE WHEN excluded.readers IS NOT NULL AND OTHERS IS NOT NULL THEN 0 ELSE 1 END
	RETURNING r.fence
),
QUEUE
SELECT l.ok, COALESCE(a.fence, c.fence, 0), COALESCE(rd.holder, c.holder, ''), REMAINING,
	COALESCE(LIVE, false) OR COALESCE(rd.n, 0) > 0, ah.n, (SELECT count(*) FROM wk), (SELECT count(*) FROM enq), pg_backend_pid(), o.ours, false
FROM l CROSS JOIN o CROSS JOIN ah LEFT JOIN acq a ON true LEFT JOIN T c ON c.ns = $1 AND c.key = $2
	LEFT JOIN LATERAL (` + readersOf + `) rd ON true`

// advisoryOthers: the live readers of row r other than $3, NULL if none.
const advisoryOthers = `(SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(r.readers) e WHERE e.key <> $3 AND READER)`

// advisoryRenew renews, on the lease's session, the writers and readers
// ($5 shared) of renewSQL's arguments (writers alone take renewSQL, about
// twice as fast for one lease); a row's readers by one update
// of their entries in its latest version (lk: locked in key order, as
// every session's renewals do, against deadlocks). It ends as
// advisoryRenewed.
const advisoryRenew = `WITH r AS NOT MATERIALIZED (
	SELECT * FROM unnest($2::text[], $3::text[], $4::float8[], $5::bool[]) WITH ORDINALITY AS r(key, token, ttl, shared, i)
),
w AS (
	UPDATE T AS l SET expires_at = clock_timestamp() + r.ttl * interval '1 microsecond'
	FROM r WHERE NOT r.shared AND l.ns = $1 AND l.key = r.key AND l.token = r.token AND l.pid = pg_backend_pid()
	RETURNING r.i, l.fence
),
lk AS MATERIALIZED (
	SELECT c.key, c.readers FROM T c WHERE c.ns = $1 AND c.key IN (SELECT key FROM r WHERE shared) ORDER BY c.key FOR UPDATE
),
rd AS (
	UPDATE T AS l SET readers = l.readers || x.entries
	FROM (SELECT r.key, array_agg(r.i) AS ix, jsonb_object_agg(r.token,
			jsonb_set(c.readers->r.token, '{0}', to_jsonb(` + nowUS + ` + r.ttl::int8))) AS entries
		FROM r JOIN lk c ON c.key = r.key WHERE r.shared AND (c.readers->r.token->>2)::int = pg_backend_pid() GROUP BY r.key) x
	WHERE l.ns = $1 AND l.key = x.key
	RETURNING x.ix, l.fence
),
u AS (SELECT i, fence FROM w UNION ALL SELECT unnest(ix), fence FROM rd)
SELECT ARRAY(SELECT i FROM u ORDER BY i), ARRAY(SELECT fence FROM u ORDER BY i), pg_backend_pid(), ` + advisoryRenewed

// advisoryRenewed ends an advisory renewal ($6 TTL in ms, $7 the keys'
// objects, $8 class, $9 the session's lease count): it gives up the locks
// of leases whose rows no longer name them (released through another
// store), and turns the idle timeout off if that was every lease of the
// session.
const advisoryRenewed = `set_config('idle_session_timeout', CASE WHEN (SELECT count(*)
	FROM unnest($7::int4[], $5::bool[]) WITH ORDINALITY AS x(obj, shared, i)
	WHERE CASE WHEN x.i IN (SELECT i FROM u) THEN false WHEN x.shared THEN pg_advisory_unlock_shared($8, x.obj)
		ELSE pg_advisory_unlock($8, x.obj) END) < $9
	THEN $6::int8::text ELSE '0' END, false)`

// advisoryLeave takes reader $3 out of row $1 ns, $2 key if its entry e is
// OWNED by the caller, and out of the queue; like releaseSQL it announces
// the key if that was its last live READER, or if a waiter left a key no
// writer holds (FREE).
const advisoryLeave = `WITH r AS (
	UPDATE T c SET readers = NULLIF(c.readers - $3::text, '{}')
	WHERE c.ns = $1 AND c.key = $2 AND EXISTS (SELECT 1 FROM jsonb_each(c.readers) e WHERE e.key = $3 AND OWNED)
	RETURNING (SELECT count(*) FROM jsonb_each(c.readers) e WHERE READER) AS others
),
d AS (DELETE FROM Q WHERE ns = $1 AND key = $2 AND token = $3 AND EXISTS (SELECT 1 FROM r) IS NOT NULL RETURNING 1),
n AS (
	SELECT pg_notify($4, COALESCE((SELECT CASE WHEN shared THEN '' ELSE token END FROM Q WHERE ns = $1 AND key = $2
		AND token <> $3 AND expires_at > clock_timestamp() ORDER BY seq LIMIT 1), '') || E'\n' || $2)
	WHERE EXISTS (SELECT 1 FROM r WHERE others = 0) OR (EXISTS (SELECT 1 FROM d) AND FREE)
)
SELECT EXISTS (SELECT 1 FROM r), (SELECT count(*) FROM n), set_config('synchronous_commit', 'off', true)`

// unlocked ends a release on the lease's session: it unlocks (UNLOCK) and,
// with $8 = 0 leases left, turns the idle timeout of the session, parked,
// off.
const unlocked = `, UNLOCK($5, $6),
	set_config('idle_session_timeout', CASE WHEN $8::int > 0 THEN $7::int8::text ELSE '0' END, false), pg_backend_pid()`

func newAdvisory(pool *pgxpool.Pool, c config) *AdvisoryStore {
	b := newBase(pool, c, advisoryLive)
	b.maxTTL = MaxAdvisoryTTL
	b.lockArgs = func(key string) []any { return []any{b.classID, hash32(key)} }
	b.fenceSQL = b.sql(`SELECT c.fence FROM T c WHERE c.ns = $1 AND c.key = $2 AND (c.token = $3 AND ` + advisoryLive(4) +
		` OR EXISTS (SELECT 1 FROM jsonb_each(c.readers) e WHERE e.key = $3 AND ` + advisoryReader(4) + `)) FOR SHARE OF c`)
	queue := fill(queueAfter, "GRANTED", "((SELECT ok FROM l) OR (SELECT ours FROM o))", "FREE", "NOT "+lockHeld(8, "true"),
		"SHARED", "$12")
	// A waiter leaving a key no writer holds announces it: readers may join.
	noWriter := "NOT " + lockHeld(5, "k.mode = 'ExclusiveLock'")
	last := fill(remaining, "c.expires_at", "COALESCE(rd.expires_at, c.expires_at)") // the writer's, or the last reader's
	leave := func(owned string) string {
		return b.sql(fill(advisoryLeave, "OWNED", owned, "READER", advisoryReader(5), "FREE", noWriter))
	}
	return &AdvisoryStore{
		base: b,
		acquireSQL: b.sql(fill(advisoryAcquire, "QUEUE", queue, "LIVE", advisoryLive(8), "READER", advisoryReader(8),
			"OTHERS", fill(advisoryOthers, "READER", advisoryReader(8)),
			"REMAINING", last)),
		renewSQL:    b.sql(fill(renewSQL, "COND", "l.pid = pg_backend_pid()", "EXTRA", advisoryRenewed)),
		mixedSQL:    b.sql(advisoryRenew),
		releaseSQL:  b.release("c.pid = pg_backend_pid()", noWriter) + fill(unlocked, "UNLOCK", "pg_advisory_unlock"),
		leaveSQL:    b.release(advisoryLive(5), noWriter),
		rReleaseSQL: leave("(e.value->>2)::int = pg_backend_pid()") + fill(unlocked, "UNLOCK", "pg_advisory_unlock_shared"),
		rLeaveSQL:   leave(advisoryReader(5)),
		infoSQL: b.sql(`SELECT COALESCE(` + advisoryLive(3) + `, false), COALESCE(rd.holder, c.holder, ''), c.fence, ` + last + `, rd.n
	FROM T c CROSS JOIN LATERAL (` + fill(readersOf, "READER", advisoryReader(3)) + `) rd WHERE c.ns = $1 AND c.key = $2`),
		sessions: make(map[int64]*session),
	}
}

// Caps adds shared holds to base's.
func (s *AdvisoryStore) Caps() driver.Caps {
	c := s.base.Caps()
	c.Shared = true
	return c
}

// Acquire takes r.Key's lock (shared if r.Shared) on the session of r.TTL
// (see driver.Store); a retry by the holding token gets its fence again.
func (s *AdvisoryStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	var a acquired
	sess, err := s.join(ctx, int64((r.TTL+time.Millisecond-1)/time.Millisecond))
	if err == nil {
		err = s.exec(ctx, sess, 1, func(ctx context.Context) (int32, error) {
			a, err = s.acquire(ctx, sess.conn, r, s.acquireSQL, s.classID, hash32(r.Key), sess.ttlMs, sess.mayTry(r), r.Shared)
			if err == nil && a.ok {
				s.mu.Lock() // counted before the session serves another statement
				if sess.held[r.Key] == nil {
					sess.held[r.Key] = make(map[string]bool)
				}
				sess.held[r.Key][r.Token] = r.Shared
				s.mu.Unlock()
			}
			return a.pid, err
		})
	}
	g, err := a.result(r, s.maxWaiters, err)
	if a.ok && errors.Is(err, lease.ErrCorrupt) { // granted over a fence we did not write: undo
		_ = s.Release(ctx, r)
	}
	return g, err
}

// Renew extends r.Key to r.TTL from now if r.Token holds it on its session.
func (s *AdvisoryStore) Renew(ctx context.Context, r driver.Request) error {
	return s.RenewMany(ctx, []driver.Request{r})[0]
}

// RenewMany renews rs with one statement per session (one per TTL in use).
// A failed session has lost its locks: the error then wraps
// lease.ErrNotHeld.
func (s *AdvisoryStore) RenewMany(ctx context.Context, rs []driver.Request) []error {
	errs := make([]error, len(rs))
	bySess := make(map[*session][]int)
	for i, r := range rs {
		if sess := s.use(r); sess != nil {
			bySess[sess] = append(bySess[sess], i)
		} else {
			errs[i] = opErr("renew", r.Key, false, nil)
		}
	}
	for sess, idx := range bySess {
		sub, objs, fences := make([]driver.Request, len(idx)), make([]int32, len(idx)), make([]int64, len(idx))
		shared, sql := make([]bool, len(idx)), s.renewSQL
		for j, i := range idx {
			sub[j], objs[j], shared[j] = rs[i], hash32(rs[i].Key), rs[i].Shared
			if shared[j] {
				sql = s.mixedSQL
			}
		}
		err := s.exec(ctx, sess, len(idx), func(ctx context.Context) (pid int32, err error) {
			fences, pid, err = s.renew(ctx, sess.conn, sql, sub, shared, sess.ttlMs, objs, s.classID, sess.leases())
			for j, r := range sub {
				if err == nil && fences[j] == 0 {
					s.drop(sess, r) // its lock was given up
				}
			}
			return pid, err
		})
		if err != nil {
			err = fmt.Errorf("%w: the lease's session failed: %w", lease.ErrNotHeld, err)
		}
		for j, i := range idx {
			errs[i] = opErr("renew", rs[i].Key, fences[j] != 0, err)
		}
	}
	s.markBroken(ctx, "renew", rs, errs)
	return errs
}

// Release frees r.Key's lock and row if r.Token holds it through this
// store. Otherwise it takes r.Token out of the key's queue, and clears the
// row of a lease held through another store (whose session gives the lock up
// at its next renewal).
func (s *AdvisoryStore) Release(ctx context.Context, r driver.Request) error {
	args := []any{s.ns, r.Key, r.Token, s.channelName, s.classID, hash32(r.Key)}
	release, leave := s.releaseSQL, s.leaveSQL
	if r.Shared {
		release, leave = s.rReleaseSQL, s.rLeaveSQL
	}
	var released bool
	sess := s.use(r)
	if sess == nil {
		err := s.pool.QueryRow(ctx, leave, args...).Scan(&released, nil, nil)
		return opErr("release", r.Key, released, err)
	}
	err := s.exec(ctx, sess, 1, func(ctx context.Context) (int32, error) {
		if !s.drop(sess, r) {
			return sess.pid, nil // given up by a renewal meanwhile
		}
		unlocked, pid := false, int32(0)
		err := sess.conn.QueryRow(ctx, release, append(args, sess.ttlMs, sess.leases())...).
			Scan(&released, nil, nil, &unlocked, nil, &pid)
		if err == nil && !unlocked {
			err = errors.New("the session did not hold the lock")
		}
		return pid, err
	})
	if err != nil && !released { // unless a Break ended it, the failed session freed the lock
		errs := []error{opErr("release", r.Key, false, nil)}
		if s.markBroken(ctx, "release", []driver.Request{r}, errs); errors.Is(errs[0], lease.ErrBroken) {
			return errs[0]
		}
	}
	return opErr("release", r.Key, released || err != nil, nil)
}

// Inspect reports key's writer, or its live readers; for a free key, Fence
// is the last granted.
func (s *AdvisoryStore) Inspect(ctx context.Context, key string) (driver.Info, error) {
	info := driver.Info{Key: key}
	var fence, us, readers int64
	err := s.pool.QueryRow(ctx, s.infoSQL, s.ns, key, s.classID, hash32(key)).Scan(&info.Held, &info.Holder, &fence, &us, &readers)
	switch {
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return driver.Info{}, fmt.Errorf("pglease: inspect %q: %w", key, corrupt(err))
	case fence < 0 || (info.Held || readers > 0) && fence == 0:
		return driver.Info{}, fmt.Errorf("pglease: inspect %q: %w: fence %d", key, lease.ErrCorrupt, fence)
	case !info.Held && readers == 0:
		return driver.Info{Key: key, Fence: uint64(fence)}, nil
	}
	info.Held, info.Shared, info.Readers = true, readers > 0, int(readers)
	info.Fence, info.Remaining = uint64(fence), time.Duration(us)*time.Microsecond
	return info, nil
}

// drop forgets r's lease on sess, if held, and reports whether it was.
func (s *AdvisoryStore) drop(sess *session, r driver.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := sess.held[r.Key][r.Token]; !ok {
		return false
	}
	if delete(sess.held[r.Key], r.Token); len(sess.held[r.Key]) == 0 {
		delete(sess.held, r.Key)
	}
	return true
}

// mayTry says whether r may try its key's lock on sess, whose locks are
// re-entrant: not while sess holds a lease of the key, unless both are
// shared.
func (sess *session) mayTry(r driver.Request) bool {
	for _, shared := range sess.held[r.Key] {
		if !shared || !r.Shared {
			return false
		}
	}
	return true
}

// leases counts the leases held on sess (under either mutex).
func (sess *session) leases() (n int) {
	for _, tokens := range sess.held {
		n += len(tokens)
	}
	return n
}

// use returns the session holding r's lease, counting a use of it (exec ends it).
func (s *AdvisoryStore) use(r driver.Request) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		if _, ok := sess.held[r.Key][r.Token]; ok {
			sess.users++
			return sess
		}
	}
	return nil
}

// join returns the session for leases of ttlMs, counting a use of it,
// opening one (an idle connection, or one taken out of the pool for good)
// if there is none.
func (s *AdvisoryStore) join(ctx context.Context, ttlMs int64) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[ttlMs]
	if sess == nil {
		var conn *pgx.Conn
		if n := len(s.idle); n > 0 {
			conn, s.idle = s.idle[n-1], s.idle[:n-1]
		} else {
			s.mu.Unlock()
			pc, err := s.pool.Acquire(ctx)
			s.mu.Lock()
			if err != nil {
				return nil, err
			}
			conn = pc.Hijack()
		}
		switch sess = s.sessions[ttlMs]; {
		case s.closed:
			closeConn(conn)
			return nil, lease.ErrClosed
		case sess != nil:
			s.park(conn) // opened meanwhile by another call
		default:
			sess = &session{conn: conn, ttlMs: ttlMs, held: make(map[string]map[string]bool)}
			s.sessions[ttlMs] = sess
		}
	}
	sess.users++
	return sess, nil
}

// park keeps conn for reuse, or closes it; s.mu is held.
func (s *AdvisoryStore) park(conn *pgx.Conn) {
	if s.closed || len(s.idle) >= s.maxIdle || conn.IsClosed() {
		closeConn(conn)
		return
	}
	s.idle = append(s.idle, conn)
}

// exec runs fn, a statement on sess, one at a time, then ends n uses of sess.
// A failure, or a statement run by another server process than the first,
// ends the session (the server frees its locks); so does the last use of a
// session without leases, whose connection is parked. fn's ctx keeps ctx's
// deadline, not its cancellation, which would cut the connection, and gives
// the statement at least the session's TTL: a statement cut short ends the
// session, so a renewal slower than the renew interval (a starved or
// fsync-bound server) would lose every lease of the session where another
// store retries it (docs/RELIABILITY.md, "Starved CPU").
func (s *AdvisoryStore) exec(ctx context.Context, sess *session, n int, fn func(ctx context.Context) (int32, error)) (err error) {
	sess.mu.Lock()
	defer func() {
		if err != nil {
			closeConn(sess.conn)
		}
		sess.mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		sess.users -= n
		if s.sessions[sess.ttlMs] == sess && (err != nil || sess.users == 0 && len(sess.held) == 0) {
			delete(s.sessions, sess.ttlMs) // its leases go with it, its connection moves on
			s.park(sess.conn)
		}
	}()
	if sess.conn.IsClosed() {
		return errors.New("pglease: the advisory-lock session ended")
	}
	sctx := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		if least := time.Now().Add(time.Duration(sess.ttlMs) * time.Millisecond); dl.Before(least) {
			dl = least
		}
		sctx, cancel = context.WithDeadline(sctx, dl)
		defer cancel()
	}
	pid, err := fn(sctx)
	if err == nil && sess.pid != 0 && pid != sess.pid {
		err = fmt.Errorf("%w (the session's server process was %d, the statement ran in %d)", ErrPooler, sess.pid, pid)
	}
	sess.pid = pid
	return err
}

// Close closes the connections the store keeps, which frees the locks of
// leases still held (close a Client using the store first), cutting any
// statement running on them. The pool stays open.
func (s *AdvisoryStore) Close() error {
	s.mu.Lock()
	s.closed = true
	idle, sessions := s.idle, s.sessions
	s.idle, s.sessions = nil, make(map[int64]*session)
	s.mu.Unlock()
	for _, c := range idle {
		closeConn(c)
	}
	for _, sess := range sessions {
		if !sess.mu.TryLock() {
			_ = sess.conn.PgConn().Conn().Close() // cut the running statement
			sess.mu.Lock()
		}
		closeConn(sess.conn)
		sess.mu.Unlock()
	}
	return nil
}
