// Advisory mode: each lease is a session-level advisory lock. The leases of
// one TTL share one dedicated connection (a server session taken out of the
// pool) while any of them is held, so that a heartbeat round is one
// statement per session however many leases it holds. The server frees the
// locks when the session ends, and ends a session idle for the TTL.

package pglease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
)

// session is a dedicated connection whose server session holds the
// advisory locks of this store's leases of one TTL.
type session struct {
	mu    sync.Mutex // a pgx.Conn serves one statement at a time
	conn  *pgx.Conn
	ttlMs int64 // the leases' TTL: idle_session_timeout while it holds any
	pid   int32 // the server process, from the first statement (under mu)

	// Under Store.mu (leases also under mu: a statement that changes the
	// session's idle timeout reads it in order with the grants).
	leases int  // leases held through the session
	users  int  // calls using it now
	dead   bool // closed: its locks are gone
}

// heldLease is a lease held through one of the store's sessions.
type heldLease struct {
	sess *session
	key  string
}

// errElsewhere: a Renew through a store that does not hold the session.
var errElsewhere = errors.New("held through another Store's connection; only that Store can renew it")

// errSessionGone: the session was closed (after a failure, or by Close)
// while a call waited for it; the call may be retried on a new one.
var errSessionGone = errors.New("the advisory-lock session ended")

// ErrPooler is wrapped in the error of a renewal that found its statement
// running in another server session than the one that took the lock: the
// pool connects through a transaction-mode pooler (pgbouncer
// pool_mode=transaction), which advisory mode cannot work behind.
var ErrPooler = errors.New("pglease: the lease's statements ran in a different server session: " +
	"advisory mode needs session pooling (not pgbouncer pool_mode=transaction or statement)")

func heldKey(token, key string) string { return token + "\x00" + key }

// lookup returns r's held lease, using its session (release with done).
func (s *Store) lookup(r lease.Request) *heldLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[heldKey(r.Token, r.Key)]
	if h != nil {
		h.sess.users++
	}
	return h
}

// take removes r's held lease and returns it, using its session (release
// with done); the session counts one lease less.
func (s *Store) take(r lease.Request) *heldLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := heldKey(r.Token, r.Key)
	h := s.held[k]
	if h != nil {
		delete(s.held, k)
		h.sess.users++
	}
	return h
}

// join returns the session for leases of ttlMs, opening one (an idle
// connection of the store's, or one taken out of the pool for good) if
// there is none; the caller uses it until done.
func (s *Store) join(ctx context.Context, ttlMs int64) (*session, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("pglease: store closed: %w", lease.ErrClosed)
	}
	if sess := s.sessions[ttlMs]; sess != nil {
		sess.users++
		s.mu.Unlock()
		return sess, nil
	}
	s.mu.Unlock()
	conn, err := s.getConn(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		closeConn(conn)
		return nil, fmt.Errorf("pglease: store closed: %w", lease.ErrClosed)
	}
	sess := s.sessions[ttlMs]
	if sess == nil {
		sess = &session{conn: conn, ttlMs: ttlMs}
		s.sessions[ttlMs] = sess
	} else {
		s.parkLocked(conn) // opened meanwhile by another call
	}
	sess.users++
	return sess, nil
}

// done ends a call's use of sess; a session that holds no lease and is not
// used is parked for reuse (its idle timeout is already off).
func (s *Store) done(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.users--
	if sess.users > 0 || sess.leases > 0 || sess.dead {
		return
	}
	if s.sessions[sess.ttlMs] == sess {
		delete(s.sessions, sess.ttlMs)
	}
	sess.dead = true // no longer a session: the connection moves on
	s.parkLocked(sess.conn)
}

// kill closes sess after a failure: the server frees its locks, and every
// lease held through it is forgotten (its next renewal reports it lost).
func (s *Store) kill(sess *session) {
	s.mu.Lock()
	if sess.dead {
		s.mu.Unlock()
		return
	}
	sess.dead = true
	if s.sessions[sess.ttlMs] == sess {
		delete(s.sessions, sess.ttlMs)
	}
	for k, h := range s.held {
		if h.sess == sess {
			delete(s.held, k)
		}
	}
	sess.leases = 0
	s.mu.Unlock()
	closeConn(sess.conn)
}

// stmtTimeout bounds a statement on a session. The caller's ctx does not
// interrupt it: pgx ends the connection of a cancelled statement, and with
// it every lease held through the session, so a statement once sent runs to
// its end or to this bound (statements take milliseconds; a session that
// is stuck for a TTL has lost its leases anyway).
func stmtTimeout(ttlMs int64) time.Duration {
	return max(time.Duration(ttlMs)*time.Millisecond, time.Second)
}

// exec runs fn on sess's connection, one call at a time. An error of fn, or
// a statement that ran in another server process than the session's first,
// ends the session (its locks may be in any state).
func (s *Store) exec(ctx context.Context, sess *session, fn func(ctx context.Context, conn *pgx.Conn) (pid int32, err error)) error {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	s.mu.Lock()
	dead := sess.dead
	s.mu.Unlock()
	if dead {
		return errSessionGone
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stmtTimeout(sess.ttlMs))
	defer cancel()
	pid, err := fn(sctx, sess.conn)
	if err == nil && sess.pid != 0 && pid != sess.pid {
		err = fmt.Errorf("%w (the session's server process was %d, the statement ran in %d)", ErrPooler, sess.pid, pid)
	}
	if err != nil {
		s.kill(sess)
		return err
	}
	sess.pid = pid
	return nil
}

// idleAfter is the session's idle_session_timeout for its current leases:
// off once it holds none, so that a parked connection is not ended.
func (s *Store) idleAfter(sess *session) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.leases == 0 {
		return "0"
	}
	return strconv.FormatInt(sess.ttlMs, 10)
}

func (s *Store) advAcquire(ctx context.Context, r lease.Request) (lease.Grant, error) {
	if h := s.lookup(r); h != nil {
		// A retry by the holding token: refresh the TTL on its session.
		defer s.done(h.sess)
		fence, err := s.advRenewHeld(ctx, r, h)
		if err != nil {
			return lease.Grant{}, err
		}
		return lease.Grant{Fence: fence}, nil
	}
	ms := ttlMillis(r.TTL)
	secs := (ms + 999) / 1000
	sess, err := s.join(ctx, ms)
	if err != nil {
		return lease.Grant{}, err
	}
	defer s.done(sess)
	var (
		ok, ours, live   bool
		fence, us, ahead int64
		holder           string
		nset, queued     int64
	)
	err = s.exec(ctx, sess, func(ctx context.Context, conn *pgx.Conn) (int32, error) {
		var pid int32
		rows, done, err := s.queryQueued(ctx, conn, r, s.q.advAcquire, s.classID, hash32(r.Key), s.ns, r.Key, r.Token, r.Holder,
			micros(r.TTL), strconv.FormatInt(ms, 10), strconv.FormatInt(secs, 10), strconv.FormatInt(ms+1000, 10),
			r.Queue, s.chanRaw)
		if err == nil {
			err = pgx.ErrNoRows
			if rows.Next() {
				err = rows.Scan(&ok, &fence, &ours, &holder, &us, &nset, &pid, &live, &ahead, nil, &queued) // nil: wk's count, read only so that it runs
			}
			rows.Close()
			err = errors.Join(err, rows.Err(), done())
		}
		if err == nil && ok {
			// Counted before the session serves another statement: a
			// release in between must not switch the idle timeout off.
			s.mu.Lock()
			s.held[heldKey(r.Token, r.Key)] = &heldLease{sess: sess, key: r.Key}
			sess.leases++
			s.mu.Unlock()
		}
		return pid, err
	})
	if err != nil {
		// A failed statement ended the session (the lock may have been
		// taken before the error, and a rollback does not free a session
		// lock).
		return lease.Grant{}, err
	}
	if !ok {
		if ours {
			// Our token, held through another store's session.
			return lease.Grant{Fence: uint64(fence)}, nil
		}
		if r.Queue && queued == 0 {
			return lease.Grant{}, &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters}
		}
		if ahead > 0 && !live {
			// Free (or its holder's session is gone), reserved for the
			// waiters ahead: the lock was not even tried.
			return lease.Grant{}, &lease.HeldError{Key: r.Key, Queued: int(ahead)}
		}
		return lease.Grant{}, &lease.HeldError{Key: r.Key, Holder: holder, Fence: uint64(fence),
			Remaining: time.Duration(us) * time.Microsecond, Queued: int(ahead)}
	}
	return lease.Grant{Fence: uint64(fence)}, nil
}

func (s *Store) advRenew(ctx context.Context, r lease.Request) error {
	h := s.lookup(r)
	if h == nil {
		var held bool
		err := s.pool.QueryRow(ctx, s.q.advForeignRenew, s.classID, hash32(r.Key), s.ns, r.Key, r.Token).Scan(&held)
		switch {
		case err != nil:
			return err
		case !held:
			return lease.ErrNotHeld
		}
		return errElsewhere
	}
	defer s.done(h.sess)
	_, err := s.advRenewHeld(ctx, r, h)
	return err
}

// advRenewHeld renews r on its session and returns the fence. A failure of
// the session means the lock is gone (or will be once the server notices):
// the lease is not held.
func (s *Store) advRenewHeld(ctx context.Context, r lease.Request, h *heldLease) (uint64, error) {
	var fence int64
	err := s.exec(ctx, h.sess, func(ctx context.Context, conn *pgx.Conn) (int32, error) {
		var (
			pid int32
			set string
		)
		err := conn.QueryRow(ctx, s.q.advRenew, s.ns, r.Key, r.Token, micros(r.TTL),
			strconv.FormatInt(h.sess.ttlMs, 10)).Scan(&fence, &pid, &set)
		if err == nil && fence == 0 {
			// The row no longer names us (a Release through another
			// store): give up our level of the lock too.
			err = s.forget(ctx, conn, []lease.Request{r}, h.sess)
		}
		return pid, err
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: the lease's session failed: %w", lease.ErrNotHeld, err)
	case fence == 0:
		return 0, lease.ErrNotHeld
	}
	return uint64(fence), nil
}

// forget drops rs, held through sess but no longer named by their rows, and
// gives up their locks on conn (sess's, whose statement the caller runs).
func (s *Store) forget(ctx context.Context, conn *pgx.Conn, rs []lease.Request, sess *session) error {
	objs := make([]int32, 0, len(rs))
	s.mu.Lock()
	for _, r := range rs {
		k := heldKey(r.Token, r.Key)
		if h := s.held[k]; h != nil && h.sess == sess {
			delete(s.held, k)
			sess.leases--
			objs = append(objs, hash32(r.Key))
		}
	}
	s.mu.Unlock()
	if len(objs) == 0 {
		return nil
	}
	var (
		n   int64
		set string
	)
	return conn.QueryRow(ctx, s.q.advUnlock, s.classID, objs, s.idleAfter(sess)).Scan(&n, &set)
}

// advRenewMany renews rs[i], i in idx, and sets errs: one statement per
// session of the store (one per TTL in use); leases held elsewhere one by
// one, as Renew does.
func (s *Store) advRenewMany(ctx context.Context, rs []lease.Request, idx []int, errs []error) {
	bySess := make(map[*session][]int)
	var order []*session
	for _, i := range idx {
		h := s.lookup(rs[i])
		if h == nil {
			if err := s.advRenew(ctx, rs[i]); err != nil {
				errs[i] = fmt.Errorf("pglease: renew %q: %w", rs[i].Key, err)
			}
			continue
		}
		if _, seen := bySess[h.sess]; !seen {
			order = append(order, h.sess)
		} else {
			s.done(h.sess) // one use per session is enough
		}
		bySess[h.sess] = append(bySess[h.sess], i)
	}
	for _, sess := range order {
		s.renewSession(ctx, sess, rs, bySess[sess], errs)
		s.done(sess)
	}
}

// renewSession renews rs[i], i in idx, all held through sess, in one
// statement; those whose rows no longer name them are given up.
func (s *Store) renewSession(ctx context.Context, sess *session, rs []lease.Request, idx []int, errs []error) {
	keys := make([]string, len(idx))
	tokens := make([]string, len(idx))
	ttls := make([]float64, len(idx))
	for j, i := range idx {
		keys[j], tokens[j], ttls[j] = rs[i].Key, rs[i].Token, micros(rs[i].TTL)
	}
	renewed := make(map[string]bool, len(idx))
	err := s.exec(ctx, sess, func(ctx context.Context, conn *pgx.Conn) (int32, error) {
		var (
			pid          int32
			set          string
			rkeys, rtoks []string
		)
		err := conn.QueryRow(ctx, s.q.advRenewMany, s.ns, keys, tokens, ttls, strconv.FormatInt(sess.ttlMs, 10)).
			Scan(&pid, &set, &rkeys, &rtoks)
		if err != nil {
			return pid, err
		}
		for j := range rkeys {
			renewed[heldKey(rtoks[j], rkeys[j])] = true
		}
		var gone []lease.Request
		for _, i := range idx {
			if !renewed[heldKey(rs[i].Token, rs[i].Key)] {
				gone = append(gone, rs[i])
			}
		}
		return pid, s.forget(ctx, conn, gone, sess)
	})
	for _, i := range idx {
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("pglease: renew %q: %w: the lease's session failed: %w", rs[i].Key, lease.ErrNotHeld, err)
		case !renewed[heldKey(rs[i].Token, rs[i].Key)]:
			errs[i] = fmt.Errorf("pglease: renew %q: %w", rs[i].Key, lease.ErrNotHeld)
		}
	}
}

func (s *Store) advRelease(ctx context.Context, r lease.Request) error {
	h := s.take(r)
	if h == nil {
		var n, notified int64
		var commit string
		err := s.pool.QueryRow(ctx, s.q.advForeignRelease, s.classID, hash32(r.Key), s.ns, r.Key, r.Token, s.chanRaw).
			Scan(&n, &notified, &commit)
		switch {
		case err != nil:
			return err
		case n != 1:
			return lease.ErrNotHeld
		}
		return nil
	}
	defer s.done(h.sess)
	var n int64
	err := s.exec(ctx, h.sess, func(ctx context.Context, conn *pgx.Conn) (int32, error) {
		s.mu.Lock()
		h.sess.leases--
		s.mu.Unlock()
		var (
			pid         int32
			notified    int64
			unlocked    bool
			set, commit string
		)
		err := conn.QueryRow(ctx, s.q.advRelease, s.classID, hash32(r.Key), s.ns, r.Key, r.Token, s.chanRaw, s.idleAfter(h.sess)).
			Scan(&n, &notified, &unlocked, &set, &commit, &pid)
		if err == nil && !unlocked {
			// Our lock was not there to give up: the session's state is
			// not what the store believes; end it.
			err = errors.New("the session did not hold the lock")
		}
		return pid, err
	})
	if errors.Is(err, errSessionGone) {
		return nil // the session's end freed the lock
	}
	if err != nil {
		// The failed statement ended the session, which frees the lock
		// (the server notices at once on a clean close, at worst after the
		// TTL): the lease is released, without an announcement.
		return nil
	}
	if n != 1 {
		return lease.ErrNotHeld
	}
	return nil
}

// getConn returns a dedicated connection: an idle one of the store's, or one
// taken out of the pool for good.
func (s *Store) getConn(ctx context.Context) (*pgx.Conn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("pglease: store closed: %w", lease.ErrClosed)
	}
	for len(s.idle) > 0 {
		c := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if !c.IsClosed() {
			s.mu.Unlock()
			return c, nil
		}
	}
	s.mu.Unlock()
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return pc.Hijack(), nil
}

// parkLocked keeps conn (which holds no lock) for reuse, or closes it; s.mu
// is held.
func (s *Store) parkLocked(conn *pgx.Conn) {
	if s.closed || len(s.idle) >= s.maxIdle || conn.IsClosed() {
		closeConn(conn)
		return
	}
	s.idle = append(s.idle, conn)
}

// closeConn closes conn, bounded in time (the connection's Terminate
// message is a single write, so callers that hold s.mu do not wait long);
// the server ends the session.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// ttlMillis rounds d up to whole milliseconds.
func ttlMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}
