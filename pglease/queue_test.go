// The queue of waiters beyond the leasetest FIFO subtests: long table names,
// and the announcement when a waiter gives up on a free key.

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
// for it announces the key, naming the next waiter, which takes it; a
// give-up while the key is held announces nothing (the release will).
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
			for i, w := range []driver.Request{b, c, d} {
				leasetest.Queued(t, ctx, s, w, i)
			}
			if err := s.Release(ctx, d); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("D's Release = %v, want ErrNotHeld", err)
			}
			if an, err := nextAnnouncement(t, ctx, sub, 300*time.Millisecond); err == nil {
				t.Fatalf("announcement %+v after D gave up while A held the key", an)
			}
			for _, r := range []driver.Request{a, b} {
				if err := s.Release(ctx, r); err != nil && !errors.Is(err, lease.ErrNotHeld) {
					t.Fatalf("%s's Release: %v", r.Holder, err)
				}
				if an, err := nextAnnouncement(t, ctx, sub, 10*time.Second); err != nil || an.Key != "k" {
					t.Fatalf("after %s's Release: announcement %+v, %v; want k", r.Holder, an, err)
				}
			}
			c.Queue = true
			if _, err := s.Acquire(ctx, c); err != nil {
				t.Fatalf("C's Acquire after B gave up: %v", err)
			}
		})
	}
}
