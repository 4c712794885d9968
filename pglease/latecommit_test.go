// A queue entry that commits after a later one: the queue is ordered by seq,
// which an entry takes when its statement inserts it, but other statements
// see the entry only once that statement commits, so a release may name a
// waiter that is not the head.

package pglease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/pglease"
)

// insertEntryUncommitted inserts r's queue entry as a refused Acquire would,
// in a transaction left open: the entry has its seq, and no other statement
// sees it until the caller commits.
func insertEntryUncommitted(t *testing.T, ctx context.Context, pool *pgxpool.Pool, s pglease.Store, r driver.Request) func() {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, "INSERT INTO "+s.QueueTable()+` (ns, key, token, expires_at)
		VALUES ($1, $2, $3, clock_timestamp() + $4::float8 * interval '1 microsecond')`,
		s.Namespace(), r.Key, r.Token, float64(r.TTL.Microseconds())); err != nil {
		t.Fatalf("insert %s's entry: %v", r.Holder, err)
	}
	return func() {
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("commit %s's entry: %v", r.Holder, err)
		}
	}
}

// nextAnnouncement returns sub's next announcement, bounded in time.
func nextAnnouncement(t *testing.T, ctx context.Context, sub driver.Subscription, d time.Duration) (driver.Announcement, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return sub.Next(ctx)
}

// TestQueueEntryCommittedLate: X queues first (its entry takes the lower
// seq) but commits after W, so A's release, which saw W's entry only, names
// W. W queues through a store that does not listen (in table mode a
// listening waiter would be handed the key, overtaking X once), as a
// Client's first request does before it subscribes, and an advisory-mode
// waiter always. W's Acquire is then refused (X is ahead), and nobody would
// wake X before its own timer: a stall of up to a renew interval for the
// whole queue. W's refused Acquire, a refresh of an entry that finds the key
// free but reserved, announces the key to the head, X, which takes it.
func TestQueueEntryCommittedLate(t *testing.T) {
	pool := sharedPool(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			s := newStore(t, pool, mode)
			quiet := storeNS(t, pool, mode, s.Namespace()) // W's: no subscription
			sub := subscribe(t, ctx, s)
			const ttl = 10 * time.Second
			a, x, w := req("k", "A", ttl), req("k", "X", ttl), req("k", "W", ttl)
			if _, err := s.Acquire(ctx, a); err != nil {
				t.Fatalf("A's Acquire: %v", err)
			}
			commitX := insertEntryUncommitted(t, ctx, pool, s, x)
			leasetest.Queued(t, ctx, quiet, w, 0) // X's entry is not visible yet
			if err := s.Release(ctx, a); err != nil {
				t.Fatalf("A's Release: %v", err)
			}
			an, err := nextAnnouncement(t, ctx, sub, 10*time.Second)
			if err != nil || an.Key != "k" || an.Next != w.Token {
				t.Fatalf("A's release announced %+v, %v; want k with W next", an, err)
			}
			commitX()
			// W, woken by the announcement, is refused.
			w.Queue, x.Queue = true, true
			_, err = quiet.Acquire(ctx, w)
			var he *lease.HeldError
			if !errors.As(err, &he) || he.Queued != 1 || he.Holder != "" {
				t.Fatalf("W's Acquire = %v, want a HeldError with 1 waiter ahead and no holder", err)
			}
			an, err = nextAnnouncement(t, ctx, sub, 3*time.Second)
			if err != nil || an.Key != "k" || an.Next != x.Token {
				t.Fatalf("after W was refused: announcement %+v, %v; want k with X next", an, err)
			}
			if _, err := s.Acquire(ctx, x); err != nil {
				t.Fatalf("X's Acquire after the announcement: %v", err)
			}
			// X's grant announces nothing; a refresh of W's entry while X
			// holds the key does not either.
			leasetest.Queued(t, ctx, quiet, w, 0)
			if an, err := nextAnnouncement(t, ctx, sub, 300*time.Millisecond); err == nil {
				t.Fatalf("announcement %+v while X holds the key", an)
			}
		})
	}
}
