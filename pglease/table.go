// Table mode: each lease is a row whose expiry the server's clock enforces;
// every operation, queue of waiters included, is one statement on any pooled
// connection.

package pglease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
)

func (s *Store) tabAcquire(ctx context.Context, r lease.Request) (lease.Grant, error) {
	var handTTL *float64 // the key is handed to the queued token only if it hears of it
	if r.Queue && s.listening.Load() > 0 {
		us := micros(r.TTL)
		handTTL = &us
	}
	rows, done, err := s.queryQueued(ctx, s.pool, r, s.q.tabAcquire, s.ns, r.Key, r.Token, r.Holder, micros(r.TTL), r.Queue, handTTL, s.chanRaw)
	if err != nil {
		return lease.Grant{}, err
	}
	defer rows.Close()
	var (
		ok, live                 bool
		fence, us, ahead, queued int64
		holder                   string
	)
	if rows.Next() {
		// nil: the column counts wk's rows, read only so that it runs;
		// queued counts enq's.
		if err := rows.Scan(&ok, &fence, &holder, &us, &live, &ahead, nil, &queued); err != nil {
			return lease.Grant{}, err
		}
	}
	rows.Close()
	if err := errors.Join(rows.Err(), done()); err != nil {
		return lease.Grant{}, err
	}
	if ok {
		return lease.Grant{Fence: uint64(fence)}, nil
	}
	if r.Queue && queued == 0 {
		return lease.Grant{}, &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters}
	}
	// Not taken: free but reserved for the waiters ahead, or held. Held
	// without a live holder in the snapshot: a concurrent acquirer committed
	// it after this statement's snapshot, someone we cannot name.
	if !live && ahead > 0 {
		return lease.Grant{}, &lease.HeldError{Key: r.Key, Queued: int(ahead)}
	}
	return lease.Grant{}, &lease.HeldError{Key: r.Key, Holder: holder, Fence: uint64(fence),
		Remaining: time.Duration(us) * time.Microsecond, Queued: int(ahead)}
}

func (s *Store) tabRenew(ctx context.Context, r lease.Request) error {
	tag, err := s.pool.Exec(ctx, s.q.tabRenew, s.ns, r.Key, r.Token, micros(r.TTL))
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return lease.ErrNotHeld
	}
	return nil
}

func (s *Store) tabRelease(ctx context.Context, r lease.Request) error {
	var n, notified, dequeued int64
	var commit string
	if err := s.pool.QueryRow(ctx, s.q.tabRelease, s.ns, r.Key, r.Token, s.chanRaw).Scan(&n, &notified, &dequeued, &commit); err != nil {
		return err
	}
	if n != 1 {
		return lease.ErrNotHeld
	}
	return nil
}

// tabRenewMany renews rs[i], i in idx, in one statement and sets errs.
func (s *Store) tabRenewMany(ctx context.Context, rs []lease.Request, idx []int, errs []error) {
	keys := make([]string, len(idx))
	tokens := make([]string, len(idx))
	ttls := make([]float64, len(idx))
	for j, i := range idx {
		keys[j], tokens[j], ttls[j] = rs[i].Key, rs[i].Token, micros(rs[i].TTL)
	}
	type kt struct{ key, token string }
	renewed := make(map[kt]bool, len(idx))
	rows, err := s.pool.Query(ctx, s.q.tabRenewMany, s.ns, keys, tokens, ttls)
	if err == nil {
		for rows.Next() {
			var k kt
			if err = rows.Scan(&k.key, &k.token); err != nil {
				break
			}
			renewed[k] = true
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	for _, i := range idx {
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("pglease: renew %q: %w", rs[i].Key, err)
		case !renewed[kt{rs[i].Key, rs[i].Token}]:
			errs[i] = fmt.Errorf("pglease: renew %q: %w", rs[i].Key, lease.ErrNotHeld)
		}
	}
}
