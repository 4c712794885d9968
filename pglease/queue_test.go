// The queue of waiters beyond the leasetest FIFO subtests: long table names,
// the announcement when a waiter gives up on a free key, and the sweep of
// expired entries.

package pglease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/pglease"
)

// dropTables drops s's tables when the test ends.
func dropTables(t *testing.T, pool *pgxpool.Pool, s pglease.Store) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+s.Table()+", "+s.QueueTable()); err != nil {
			t.Errorf("drop %s: %v", s.Table(), err)
		}
	})
}

// queueRows counts the queue entries of s's namespace.
func queueRows(t *testing.T, ctx context.Context, pool *pgxpool.Pool, s pglease.Store) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+s.QueueTable()+" WHERE ns = $1", s.Namespace()).Scan(&n); err != nil {
		t.Fatalf("count queue entries: %v", err)
	}
	return n
}

// TestQueueLongTableName: with a lease table name of PostgreSQL's maximum
// length, the queue table's name is shortened with a hash (two such names
// with the same prefix do not collide) and works.
func TestQueueLongTableName(t *testing.T) {
	pool := sharedPool(t)
	ctx := testCtx(t, 30*time.Second)
	prefix := "pglease_long_" + randHex(4) + "_"
	var stores []pglease.Store
	for _, end := range []string{"a", "b"} {
		name := prefix + strings.Repeat("é", (63-len(prefix)-1)/2) + end
		if len(name) > 63 {
			t.Fatalf("test name of %d bytes", len(name))
		}
		s := newStore(t, pool, pglease.ModeTable, pglease.WithTable(name))
		dropTables(t, pool, s)
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate(%s): %v", name, err)
		}
		stores = append(stores, s)
	}
	if stores[0].QueueTable() == stores[1].QueueTable() {
		t.Fatalf("two lease tables share the queue table %s", stores[0].QueueTable())
	}
	for _, s := range stores {
		// The name PostgreSQL stores is the one the store uses (not
		// truncated to another one).
		var got string
		if err := pool.QueryRow(ctx, "SELECT $1::regclass::text", s.QueueTable()).Scan(&got); err != nil {
			t.Fatalf("queue table %s: %v", s.QueueTable(), err)
		}
		if got != s.QueueTable() && (pgx.Identifier{got}).Sanitize() != s.QueueTable() {
			t.Errorf("queue table is %s, the store uses %s", got, s.QueueTable())
		}
		a, b := req("k", "A", 5*time.Second), req("k", "B", 5*time.Second)
		if _, err := s.Acquire(ctx, a); err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		leasetest.Queued(t, ctx, s, b, 0)
		if n := queueRows(t, ctx, pool, s); n != 1 {
			t.Errorf("%d queue entries, want 1", n)
		}
	}
}

// TestQueueGiveUpAnnounces: a waiter that gives up on a free key reserved
// for it announces the key, so the next waiter looks again at once; giving
// up while the key is held announces nothing new (the holder's release
// will).
func TestQueueGiveUpAnnounces(t *testing.T) {
	pool := sharedPool(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			s := newStore(t, pool, mode)
			sub := subscribe(t, ctx, s)
			const ttl = 10 * time.Second
			a, b, c, d := req("k", "A", ttl), req("k", "B", ttl), req("k", "C", ttl), req("k", "D", ttl)
			if _, err := s.Acquire(ctx, a); err != nil {
				t.Fatalf("A's Acquire: %v", err)
			}
			leasetest.Queued(t, ctx, s, b, 0)
			leasetest.Queued(t, ctx, s, c, 1)
			leasetest.Queued(t, ctx, s, d, 2)
			// D gives up while A holds the key: no announcement.
			if err := s.Release(ctx, d); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("D's Release = %v, want ErrNotHeld", err)
			}
			quiet(t, ctx, sub, "D gave up while A held the key")
			if err := s.Release(ctx, a); err != nil {
				t.Fatalf("A's Release: %v", err)
			}
			if key := next(t, ctx, sub); key != "k" {
				t.Fatalf("announcement %q, want k (A's release; D's give-up must not announce)", key)
			}
			// B gives up on the free key reserved for it: announced, and C
			// is now first.
			if err := s.Release(ctx, b); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("B's Release = %v, want ErrNotHeld", err)
			}
			if key := next(t, ctx, sub); key != "k" {
				t.Fatalf("announcement %q, want k", key)
			}
			c.Queue = true
			if _, err := s.Acquire(ctx, c); err != nil {
				t.Fatalf("C's Acquire after B gave up: %v", err)
			}
			// A release that neither held nor was queued announces nothing:
			// the next announcement is C's release.
			if err := s.Release(ctx, req("k", "stranger", ttl)); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("a stranger's Release = %v, want ErrNotHeld", err)
			}
			quiet(t, ctx, sub, "a stranger's Release")
			if err := s.Release(ctx, c); err != nil {
				t.Fatalf("C's Release: %v", err)
			}
			if key := next(t, ctx, sub); key != "k" {
				t.Fatalf("announcement %q, want k", key)
			}
			quiet(t, ctx, sub, "C's release was announced once")
		})
	}
}

// quiet fails if sub delivers an announcement within 300ms.
func quiet(t *testing.T, ctx context.Context, sub driver.Subscription, after string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if key, err := sub.Next(ctx); err == nil {
		t.Fatalf("an announcement of %q after: %s", key, after)
	}
}

// next returns the next announcement, bounded in time.
func next(t *testing.T, ctx context.Context, sub driver.Subscription) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	an, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return an.Key
}

// TestQueueSweep: expired entries do not stay: an Acquire of the key drops
// its expired entries, and a Release sweeps those of other keys of the
// namespace (a waiter that died on a key nobody uses again).
func TestQueueSweep(t *testing.T) {
	pool := sharedPool(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			s := newStore(t, pool, mode)
			const short, long = 100 * time.Millisecond, 10 * time.Second
			a := req("k1", "A", long)
			if _, err := s.Acquire(ctx, a); err != nil {
				t.Fatalf("A's Acquire: %v", err)
			}
			leasetest.Queued(t, ctx, s, req("k1", "dead1", short), 0)
			leasetest.Queued(t, ctx, s, req("k1", "dead2", short), 1)
			h := req("k2", "H", long)
			if _, err := s.Acquire(ctx, h); err != nil {
				t.Fatalf("H's Acquire: %v", err)
			}
			leasetest.Queued(t, ctx, s, req("k2", "dead3", short), 0)
			if n := queueRows(t, ctx, pool, s); n != 3 {
				t.Fatalf("%d queue entries, want 3", n)
			}
			time.Sleep(3 * short)
			// A newcomer on k1 sees nobody ahead (the dead expired) and its
			// Acquire drops k1's expired entries.
			leasetest.Queued(t, ctx, s, req("k1", "B", long), 0)
			if n := queueRows(t, ctx, pool, s); n != 2 {
				t.Fatalf("%d queue entries after an Acquire of k1, want 2 (B's and k2's)", n)
			}
			// A's release (of k1) sweeps k2's expired entry.
			if err := s.Release(ctx, a); err != nil {
				t.Fatalf("A's Release: %v", err)
			}
			if n := queueRows(t, ctx, pool, s); n != 1 {
				t.Fatalf("%d queue entries after a Release, want 1 (B's)", n)
			}
		})
	}
}
