// Advisory mode: each lease is a session-level advisory lock held by a
// dedicated connection (taken out of the pool) for the life of the lease. The
// heartbeat's renewal is a statement on that connection; the server frees the
// lock when the session ends and ends a session idle for the TTL.

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

// heldConn is a connection whose session holds one lease's advisory lock.
type heldConn struct {
	mu   sync.Mutex // a pgx.Conn serves one statement at a time
	conn *pgx.Conn
	key  string
	pid  int32 // the server process of the session that took the lock
}

// errElsewhere: a Renew through a store that does not hold the session.
var errElsewhere = errors.New("held through another Store's connection; only that Store can renew it")

// ErrPooler is wrapped in the error of a renewal that found its statement
// running in another server session than the one that took the lock: the
// pool connects through a transaction-mode pooler (pgbouncer
// pool_mode=transaction), which advisory mode cannot work behind.
var ErrPooler = errors.New("pglease: the lease's statements ran in a different server session: " +
	"advisory mode needs session pooling (not pgbouncer pool_mode=transaction or statement)")

func heldKey(token, key string) string { return token + "\x00" + key }

func (s *Store) lookup(r lease.Request) *heldConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[heldKey(r.Token, r.Key)]
}

// take removes and returns the held connection of r, if this store has it.
func (s *Store) take(r lease.Request) *heldConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := heldKey(r.Token, r.Key)
	h := s.held[k]
	delete(s.held, k)
	return h
}

// drop forgets h if it is still r's and closes its connection: the server
// frees the session's locks.
func (s *Store) drop(r lease.Request, h *heldConn) {
	s.mu.Lock()
	k := heldKey(r.Token, r.Key)
	if s.held[k] == h {
		delete(s.held, k)
	}
	s.mu.Unlock()
	closeConn(h.conn)
}

func (s *Store) advAcquire(ctx context.Context, r lease.Request) (lease.Grant, error) {
	if h := s.lookup(r); h != nil {
		// A retry by the holding token: refresh the TTL on its session.
		fence, err := s.advRenewHeld(ctx, r, h)
		if err != nil {
			return lease.Grant{}, err
		}
		return lease.Grant{Fence: fence}, nil
	}
	conn, err := s.getConn(ctx)
	if err != nil {
		return lease.Grant{}, err
	}
	ms := ttlMillis(r.TTL)
	secs := (ms + 999) / 1000
	var (
		ok, ours, live   bool
		fence, us, ahead int64
		holder           string
		nset             int64
		pid              int32
		objectHash       = hash32(r.Key)
	)
	err = conn.QueryRow(ctx, s.q.advAcquire, s.classID, objectHash, s.ns, r.Key, r.Token, r.Holder,
		micros(r.TTL), strconv.FormatInt(ms, 10), strconv.FormatInt(secs, 10), strconv.FormatInt(ms+1000, 10),
		r.Queue,
	).Scan(&ok, &fence, &ours, &holder, &us, &nset, &pid, &live, &ahead)
	if err != nil {
		// The lock may have been taken before the error (and a rollback does
		// not free a session lock): end the session.
		closeConn(conn)
		return lease.Grant{}, err
	}
	if !ok {
		s.putIdle(conn)
		if ours {
			// Our token, held through another store's session.
			return lease.Grant{Fence: uint64(fence)}, nil
		}
		if ahead > 0 && !live {
			// Free (or its holder's session is gone), reserved for the
			// waiters ahead: the lock was not even tried.
			return lease.Grant{}, &lease.HeldError{Key: r.Key, Queued: int(ahead)}
		}
		return lease.Grant{}, &lease.HeldError{Key: r.Key, Holder: holder, Fence: uint64(fence),
			Remaining: time.Duration(us) * time.Microsecond, Queued: int(ahead)}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		closeConn(conn)
		return lease.Grant{}, fmt.Errorf("pglease: store closed: %w", lease.ErrClosed)
	}
	s.held[heldKey(r.Token, r.Key)] = &heldConn{conn: conn, key: r.Key, pid: pid}
	s.mu.Unlock()
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
	_, err := s.advRenewHeld(ctx, r, h)
	return err
}

// advRenewHeld renews r on its session and returns the fence. Any failure of
// the session means the lock is gone (or will be once the server notices):
// the lease is not held.
func (s *Store) advRenewHeld(ctx context.Context, r lease.Request, h *heldConn) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var (
		fence int64
		pid   int32
		set   string
	)
	err := h.conn.QueryRow(ctx, s.q.advRenew, s.ns, r.Key, r.Token, micros(r.TTL),
		strconv.FormatInt(ttlMillis(r.TTL), 10)).Scan(&fence, &pid, &set)
	switch {
	case err != nil:
		s.drop(r, h)
		return 0, fmt.Errorf("%w: the lease's session failed: %w", lease.ErrNotHeld, err)
	case pid != h.pid:
		s.drop(r, h)
		return 0, fmt.Errorf("%w: %w (locked in server process %d, renewed in %d)", lease.ErrNotHeld, ErrPooler, h.pid, pid)
	case fence == 0:
		// The row no longer names us (a Release through another store):
		// give up the lock too.
		s.mu.Lock()
		k := heldKey(r.Token, r.Key)
		if s.held[k] == h {
			delete(s.held, k)
		}
		s.mu.Unlock()
		s.unlockAndPark(ctx, r, h.conn)
		return 0, lease.ErrNotHeld
	}
	return uint64(fence), nil
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
	h.mu.Lock()
	defer h.mu.Unlock()
	var (
		n, notified int64
		unlocked    bool
		set, commit string
	)
	err := h.conn.QueryRow(ctx, s.q.advRelease, s.classID, hash32(r.Key), s.ns, r.Key, r.Token, s.chanRaw).
		Scan(&n, &notified, &unlocked, &set, &commit)
	if err != nil {
		// Ending the session frees the lock (the server notices at once on
		// a clean close, at worst after the TTL): the lease is released,
		// without an announcement.
		closeConn(h.conn)
		return nil
	}
	if unlocked {
		s.putIdle(h.conn)
	} else {
		closeConn(h.conn)
	}
	if n != 1 {
		return lease.ErrNotHeld
	}
	return nil
}

// unlockAndPark frees r's lock on conn and keeps conn for reuse, or closes it.
func (s *Store) unlockAndPark(ctx context.Context, r lease.Request, conn *pgx.Conn) {
	var (
		unlocked bool
		set      string
	)
	if err := conn.QueryRow(ctx, s.q.advUnlock, s.classID, hash32(r.Key)).Scan(&unlocked, &set); err != nil || !unlocked {
		closeConn(conn)
		return
	}
	s.putIdle(conn)
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

// putIdle keeps conn (which holds no lock) for reuse, or closes it.
func (s *Store) putIdle(conn *pgx.Conn) {
	s.mu.Lock()
	if s.closed || len(s.idle) >= s.maxIdle || conn.IsClosed() {
		s.mu.Unlock()
		closeConn(conn)
		return
	}
	s.idle = append(s.idle, conn)
	s.mu.Unlock()
}

// closeConn closes conn, bounded in time; the server ends the session.
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
