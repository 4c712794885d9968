// AdvisoryStore: each lease is a session-level advisory lock. The leases of
// one TTL share one dedicated connection (a server session taken out of the
// pool) while any of them is held; the server frees the locks when the
// session ends, and ends a session idle for the TTL.

package pglease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

	mu       sync.Mutex
	sessions map[int64]*session    // by TTL in ms
	held     map[string]*heldLease // by key: one lease per key per store
	idle     []*pgx.Conn
	closed   bool
}

// session is a dedicated connection holding the locks of one TTL's leases.
type session struct {
	mu    sync.Mutex // one statement at a time
	conn  *pgx.Conn
	ttlMs int64
	pid   int32 // the server process, from the first statement (under mu)
	// Under AdvisoryStore.mu:
	leases, users int
}

type heldLease struct {
	sess  *session
	token string
}

// lockHeld is true when the advisory lock ($C, $O) is granted to the
// session c.pid (any session if PID is true) in this database.
const lockHeld = `EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.granted AND PID
	AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND k.classid = $C::int4::oid AND k.objid = $O::int4::oid AND k.objsubid = 2)`

// advisoryAcquire: $8 class, $9 object, $10 TTL in ms, $11 keepalive idle
// in s, $12 tcp_user_timeout in ms, $13 may try the lock (this store holds
// no lease of the key: session locks are re-entrant). Only the head of the
// queue tries the lock, unless the token already holds it (o: a retry,
// granted as it is); in the same statement the row gets the token and
// fence+1, and the session a server-side expiry: idle_session_timeout = TTL,
// and TCP settings that drop a vanished peer in about TTL + 1 s.
const advisoryAcquire = `WITH ` + liveQueue + `,
o AS MATERIALIZED (SELECT EXISTS (SELECT 1 FROM T c WHERE c.ns = $1 AND c.key = $2 AND c.token = $3 AND HELD) AS ours),
l AS MATERIALIZED (SELECT ok, CASE WHEN ok THEN set_config('idle_session_timeout', $10, false)
		|| set_config('tcp_keepalives_idle', $11, false) || set_config('tcp_keepalives_interval', '1', false)
		|| set_config('tcp_keepalives_count', '1', false) || set_config('tcp_user_timeout', $12, false) END AS s
	FROM (SELECT CASE WHEN $13::bool AND (SELECT n FROM ah) = 0 AND NOT (SELECT ours FROM o)
		THEN pg_try_advisory_lock($8, $9) ELSE false END AS ok) t),
acq AS (
	INSERT INTO T AS r (ns, key, token, holder, fence, expires_at, pid)
	SELECT $1, $2, $3, $4, 1, clock_timestamp() + $5::float8 * interval '1 microsecond', pg_backend_pid() FROM l WHERE l.ok
	ON CONFLICT (ns, key) DO UPDATE SET token = excluded.token, holder = excluded.holder,
		fence = r.fence + 1, expires_at = excluded.expires_at, pid = excluded.pid
	RETURNING r.fence
),
QUEUE
SELECT l.ok, COALESCE(a.fence, c.fence, 0), COALESCE(c.holder, ''), ` + remaining + `,
	COALESCE(c.token IS NOT NULL AND HELD, false), ah.n, (SELECT count(*) FROM wk), (SELECT count(*) FROM enq), pg_backend_pid(), o.ours
FROM l CROSS JOIN o CROSS JOIN ah LEFT JOIN acq a ON true LEFT JOIN T c ON c.ns = $1 AND c.key = $2`

// advisoryRelease, on the lease's session: $5 class, $6 object, $7 the
// session's idle_session_timeout afterwards ('0' once it holds no lease).
const advisoryRelease = `WITH r AS (
	UPDATE T SET token = NULL, holder = '', expires_at = NULL, pid = NULL
	WHERE ns = $1 AND key = $2 AND token = $3 AND pid = pg_backend_pid()
	RETURNING 1
),
`

// advisoryRenewed ends an advisory renewal ($5 TTL in ms, $6 the keys'
// objects, $7 class, $8 the session's lease count): it gives up the locks of
// leases whose rows no longer name them (released through another store),
// and turns the idle timeout off if that was every lease of the session.
const advisoryRenewed = `set_config('idle_session_timeout', CASE WHEN (SELECT count(*)
	FROM unnest($6::int4[]) WITH ORDINALITY AS x(obj, i)
	WHERE CASE WHEN x.i IN (SELECT i FROM u) THEN false
		ELSE pg_advisory_unlock($7, x.obj) END) < $8
	THEN $5 ELSE '0' END, false)`

func newAdvisory(pool *pgxpool.Pool, n names) (*AdvisoryStore, error) {
	b, err := newBase(pool, n)
	if err != nil {
		return nil, err
	}
	held := func(c, o string, any bool) string {
		pid := "k.pid = c.pid"
		if any {
			pid = "true"
		}
		return fill(lockHeld, "$C", c, "$O", o, "PID", pid)
	}
	b.maxTTL = MaxAdvisoryTTL
	b.lockArgs = func(key string) []any { return []any{b.classID, hash32(key)} }
	b.inspectSQL = b.sql(`SELECT c.token IS NOT NULL AND ` + held("$3", "$4", false) + `, c.holder, c.fence, ` + remaining + ` FROM T c WHERE c.ns = $1 AND c.key = $2`)
	b.fenceSQL = b.sql(`SELECT c.fence FROM T c WHERE c.ns = $1 AND c.key = $2 AND c.token = $3 AND ` + held("$4", "$5", false) + ` FOR SHARE OF c`)
	granted, released := "((SELECT ok FROM l) OR (SELECT ours FROM o))", "EXISTS (SELECT 1 FROM r)"
	acquire := fill(queueAfter, "GRANTED", granted, "FREE", "NOT "+held("$8", "$9", true))
	return &AdvisoryStore{
		base:       b,
		acquireSQL: b.sql(fill(advisoryAcquire, "QUEUE", acquire, "HELD", held("$8", "$9", false))),
		renewSQL:   b.sql(fill(renewSQL, "COND", "l.pid = pg_backend_pid()", "EXTRA", advisoryRenewed)),
		releaseSQL: b.sql(advisoryRelease + fill(releaseAfter, "RELEASED", released, "FREE", "NOT "+held("$5", "$6", true)) +
			", pg_advisory_unlock($5, $6), set_config('idle_session_timeout', $7, false), pg_backend_pid()"),
		leaveSQL: b.sql(`WITH r AS (UPDATE T c SET token = NULL, holder = '', expires_at = NULL, pid = NULL
	WHERE c.ns = $1 AND c.key = $2 AND c.token = $3 AND ` + held("$5", "$6", false) + ` RETURNING 1),
` + fill(releaseAfter, "RELEASED", released, "FREE", "NOT "+held("$5", "$6", true))),
		sessions: make(map[int64]*session),
		held:     make(map[string]*heldLease),
	}, nil
}

// Acquire takes r.Key's lock on the session of r.TTL (see driver.Store); a
// retry by the holding token gets its fence again.
func (s *AdvisoryStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	ms := int64((r.TTL + time.Millisecond - 1) / time.Millisecond)
	sess, err := s.join(ctx, ms)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("pglease: acquire %q: %w", r.Key, err)
	}
	defer s.done(sess)
	var a acquired
	err = s.exec(ctx, sess, func(ctx context.Context) (int32, error) {
		s.mu.Lock()
		free := s.held[r.Key] == nil
		s.mu.Unlock()
		a, err = s.acquire(ctx, sess.conn, r, s.acquireSQL, s.classID, hash32(r.Key), strconv.FormatInt(ms, 10),
			strconv.FormatInt((ms+999)/1000, 10), strconv.FormatInt(ms+1000, 10), free)
		if err == nil && a.ok {
			// Counted before the session serves another statement.
			s.mu.Lock()
			s.held[r.Key] = &heldLease{sess: sess, token: r.Token}
			sess.leases++
			s.mu.Unlock()
		}
		return a.pid, err
	})
	if err != nil {
		return driver.Grant{}, fmt.Errorf("pglease: acquire %q: %w", r.Key, err)
	}
	return a.result(r, s.maxWaiters)
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
	var order []*session
	for i, r := range rs {
		h := s.use(r)
		if h == nil {
			errs[i] = renewErr(r.Key, 0, nil)
			continue
		}
		if bySess[h.sess] == nil {
			order = append(order, h.sess)
		} else {
			s.done(h.sess) // one use per session is enough
		}
		bySess[h.sess] = append(bySess[h.sess], i)
	}
	for _, sess := range order {
		idx := bySess[sess]
		sub, objs, fences := make([]driver.Request, len(idx)), make([]int32, len(idx)), make([]int64, len(idx))
		for j, i := range idx {
			sub[j], objs[j] = rs[i], hash32(rs[i].Key)
		}
		err := s.exec(ctx, sess, func(ctx context.Context) (pid int32, err error) {
			s.mu.Lock()
			leases := sess.leases
			s.mu.Unlock()
			fences, pid, err = s.renew(ctx, sess.conn, s.renewSQL, sub, strconv.FormatInt(sess.ttlMs, 10), objs, s.classID, leases)
			for j, r := range sub {
				if err == nil && fences[j] == 0 {
					s.drop(sess, r) // its lock was given up
				}
			}
			return pid, err
		})
		s.done(sess)
		if err != nil {
			err = fmt.Errorf("%w: the lease's session failed: %w", lease.ErrNotHeld, err)
		}
		for j, i := range idx {
			errs[i] = renewErr(rs[i].Key, fences[j], err)
		}
	}
	return errs
}

// Release frees r.Key's lock and row if r.Token holds it through this
// store. Otherwise it takes r.Token out of the key's queue, and clears the
// row of a lease held through another store (whose session gives the lock up
// at its next renewal).
func (s *AdvisoryStore) Release(ctx context.Context, r driver.Request) error {
	args := []any{s.ns, r.Key, r.Token, s.channelName, s.classID, hash32(r.Key)}
	var released bool
	h := s.use(r)
	if h == nil {
		err := s.pool.QueryRow(ctx, s.leaveSQL, args...).Scan(&released, nil, nil)
		return releaseErr(r.Key, released, err)
	}
	defer s.done(h.sess)
	err := s.exec(ctx, h.sess, func(ctx context.Context) (int32, error) {
		if !s.drop(h.sess, r) {
			return h.sess.pid, nil // given up by a renewal meanwhile
		}
		var unlocked bool
		var pid int32
		err := h.sess.conn.QueryRow(ctx, s.releaseSQL, append(args, s.idleTimeout(h.sess))...).
			Scan(&released, nil, nil, &unlocked, nil, &pid)
		if err == nil && !unlocked {
			err = errors.New("the session did not hold the lock")
		}
		return pid, err
	})
	if err != nil {
		return nil // the failure ended the session, which frees its locks
	}
	return releaseErr(r.Key, released, nil)
}

// drop forgets r's lease on sess, if held, and reports whether it was.
func (s *AdvisoryStore) drop(sess *session, r driver.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[r.Key]
	if h == nil || h.sess != sess || h.token != r.Token {
		return false
	}
	delete(s.held, r.Key)
	sess.leases--
	return true
}

// idleTimeout is sess's idle_session_timeout: its TTL, or off ('0') once it
// holds no lease, so that a parked connection is not ended.
func (s *AdvisoryStore) idleTimeout(sess *session) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.leases == 0 {
		return "0"
	}
	return strconv.FormatInt(sess.ttlMs, 10)
}

// use returns r's held lease, counting a use of its session (end with done).
func (s *AdvisoryStore) use(r driver.Request) *heldLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[r.Key]
	if h == nil || h.token != r.Token {
		return nil
	}
	h.sess.users++
	return h
}

// join returns the session for leases of ttlMs, opening one (an idle
// connection, or one taken out of the pool for good) if there is none.
func (s *AdvisoryStore) join(ctx context.Context, ttlMs int64) (*session, error) {
	s.mu.Lock()
	if sess := s.sessions[ttlMs]; sess != nil && !s.closed {
		sess.users++
		s.mu.Unlock()
		return sess, nil
	}
	var conn *pgx.Conn
	if n := len(s.idle); n > 0 {
		conn, s.idle = s.idle[n-1], s.idle[:n-1]
	}
	s.mu.Unlock()
	if conn == nil {
		pc, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		conn = pc.Hijack()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		closeConn(conn)
		return nil, lease.ErrClosed
	}
	sess := s.sessions[ttlMs]
	if sess == nil {
		sess = &session{conn: conn, ttlMs: ttlMs}
		s.sessions[ttlMs] = sess
	} else {
		s.park(conn) // opened meanwhile by another call
	}
	sess.users++
	return sess, nil
}

// done ends a use of sess; a session that holds no lease and is not used is
// parked for reuse (its idle timeout is already off).
func (s *AdvisoryStore) done(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.users--
	if sess.users == 0 && sess.leases == 0 && s.sessions[sess.ttlMs] == sess {
		delete(s.sessions, sess.ttlMs) // no longer a session: the connection moves on
		s.park(sess.conn)
	}
}

// park keeps conn for reuse, or closes it; s.mu is held.
func (s *AdvisoryStore) park(conn *pgx.Conn) {
	if s.closed || len(s.idle) >= s.maxIdle || conn.IsClosed() {
		closeConn(conn)
		return
	}
	s.idle = append(s.idle, conn)
}

// exec runs fn, a statement on sess, one at a time. A failure, or a
// statement that ran in another server process than the session's first,
// ends the session: its locks may be in any state, and the server frees
// them. fn's ctx keeps ctx's deadline but not its cancellation: pgx cuts
// the connection of a cancelled statement, and with it every lease of the
// session.
func (s *AdvisoryStore) exec(ctx context.Context, sess *session, fn func(ctx context.Context) (int32, error)) error {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	s.mu.Lock()
	live := s.sessions[sess.ttlMs] == sess
	s.mu.Unlock()
	if !live {
		return errors.New("pglease: the advisory-lock session ended")
	}
	sctx := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(sctx, dl)
		defer cancel()
	}
	pid, err := fn(sctx)
	if err == nil && sess.pid != 0 && pid != sess.pid {
		err = fmt.Errorf("%w (the session's server process was %d, the statement ran in %d)", ErrPooler, sess.pid, pid)
	}
	if err == nil {
		sess.pid = pid
		return nil
	}
	s.mu.Lock()
	if s.sessions[sess.ttlMs] == sess {
		delete(s.sessions, sess.ttlMs)
	}
	for k, h := range s.held {
		if h.sess == sess {
			delete(s.held, k)
		}
	}
	s.mu.Unlock()
	closeConn(sess.conn)
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
	clear(s.held)
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
