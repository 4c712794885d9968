// Fenced writes: FencedTx rejects a stalled holder's write and holds off a
// takeover until a write in progress commits; the lock_version pattern for
// the user's own tables.

package pglease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/pglease"
)

// userTable creates a table of the test's own (the resource the lease
// protects), dropped when the test ends, and returns its quoted name.
func userTable(t *testing.T, pool *pgxpool.Pool, columns string) string {
	t.Helper()
	name := pgx.Identifier{"pglease_test_resource_" + randHex(6)}.Sanitize()
	ctx := testCtx(t, 10*time.Second)
	if _, err := pool.Exec(ctx, "CREATE TABLE "+name+" ("+columns+")"); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+name)
	})
	return name
}

func countRows(t *testing.T, pool *pgxpool.Pool, table, where string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(testCtx(t, 10*time.Second), "SELECT count(*) FROM "+table+" WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// TestFencedTxStalledHolder: a holder whose renewals stall past its TTL has
// its FencedTx write rejected by PostgreSQL (before and after another client
// takes the key over); the new holder's write goes through.
func TestFencedTxStalledHolder(t *testing.T) {
	// The stalled holder's TTL outlasts a busy machine's late renewals
	// before the stall; the next holder's must not lapse during the test.
	const ttl, long = 2 * time.Second, 30 * time.Second
	pool := sharedPool(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			ns := namespace(t)
			s := storeNS(t, pool, mode, ns)
			fs := leasetest.Faulty(s)
			c1 := newClient(t, fs, lease.WithTTL(ttl))
			c2 := newClient(t, storeNS(t, pool, mode, ns), lease.WithTTL(long))
			table := userTable(t, pool, "writer text NOT NULL, fence bigint NOT NULL")
			write := func(l *lease.Lease, who string) error {
				return s.FencedTx(ctx, l, func(ctx context.Context, tx pgx.Tx) error {
					_, err := tx.Exec(ctx, "INSERT INTO "+table+" (writer, fence) VALUES ($1, $2)", who, int64(l.Fence()))
					return err
				})
			}
			key := "fenced-" + randHex(4)
			l1, err := c1.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			if err := write(l1, "holder-before-stall"); err != nil {
				t.Fatalf("FencedTx while held: %v", err)
			}

			fs.BlockRenewals(true) // the holder stalls
			// Wait for the store to see the lease expired (by the server's
			// clock, or the end of the idle session) rather than for a
			// fixed time, which a busy server may overrun.
			waitExpired(t, ctx, s, key, 10*ttl)
			if err := write(l1, "stalled-holder"); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("FencedTx of the stalled holder past its TTL: %v, want ErrNotHeld", err)
			}
			l2, err := c2.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire by the next holder: %v", err)
			}
			if l2.Fence() <= l1.Fence() {
				t.Fatalf("next holder's fence %d, want > %d", l2.Fence(), l1.Fence())
			}
			if err := write(l1, "stalled-holder"); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("FencedTx of the stalled holder after the takeover: %v, want ErrNotHeld", err)
			}
			if err := write(l2, "next-holder"); err != nil {
				t.Fatalf("FencedTx of the next holder: %v", err)
			}
			if n := countRows(t, pool, table, "writer = 'stalled-holder'"); n != 0 {
				t.Errorf("%d rows of the stalled holder were written, want 0", n)
			}
			if n := countRows(t, pool, table, "writer IN ('holder-before-stall', 'next-holder')"); n != 2 {
				t.Errorf("%d rows of the legitimate writes, want 2", n)
			}
		})
	}
}

// waitExpired polls s until key is no longer held, failing t after d.
func waitExpired(t *testing.T, ctx context.Context, s driver.Store, key string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		info, err := s.Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect(%q): %v", key, err)
		}
		if !info.Held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q still held %v after its holder stalled: %+v", key, d, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFencedTxHoldsOffTakeover: a holder that stalls inside FencedTx, after
// the check, past its TTL still commits, and nobody is granted the key (a
// larger fence) before that commit.
func TestFencedTxHoldsOffTakeover(t *testing.T) {
	const ttl = 300 * time.Millisecond
	pool := sharedPool(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			ns := namespace(t)
			s := storeNS(t, pool, mode, ns)
			fs := leasetest.Faulty(s)
			c1 := newClient(t, fs, lease.WithTTL(ttl))
			c2 := newClient(t, storeNS(t, pool, mode, ns), lease.WithTTL(ttl))
			key := "holdoff-" + randHex(4)
			l1, err := c1.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			fs.BlockRenewals(true)
			var committed atomic.Int64 // UnixNano of the commit
			type result struct {
				l  *lease.Lease
				at time.Time
			}
			got := make(chan result, 1)
			err = s.FencedTx(ctx, l1, func(ctx context.Context, tx pgx.Tx) error {
				go func() {
					l, err := c2.Acquire(ctx, key)
					if err != nil {
						t.Errorf("Acquire by the next holder: %v", err)
					}
					got <- result{l, time.Now()}
				}()
				time.Sleep(2 * ttl) // paused past the TTL between the check and the commit
				committed.Store(time.Now().UnixNano())
				return nil
			})
			if err != nil {
				t.Fatalf("FencedTx: %v", err)
			}
			var r result
			select {
			case r = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("the next holder did not acquire within 10s")
			}
			if r.l == nil {
				t.FailNow()
			}
			if r.at.UnixNano() < committed.Load() {
				t.Errorf("the next holder was granted the key %v before the paused holder's transaction committed",
					time.Duration(committed.Load()-r.at.UnixNano()))
			}
			if r.l.Fence() <= l1.Fence() {
				t.Errorf("next holder's fence %d, want > %d", r.l.Fence(), l1.Fence())
			}
		})
	}
}

// TestLockVersionPattern: the documented pattern for a table the user owns:
// each write carries the lease's fence, and a row accepts only fences at least
// as large as the last one it saw.
func TestLockVersionPattern(t *testing.T) {
	pool := sharedPool(t)
	ctx := testCtx(t, 30*time.Second)
	const ttl = 200 * time.Millisecond
	s := newStore(t, pool, pglease.ModeTable)
	table := userTable(t, pool, "id int PRIMARY KEY, value text NOT NULL, lock_version bigint NOT NULL DEFAULT 0")
	if _, err := pool.Exec(ctx, "INSERT INTO "+table+" (id, value) VALUES (1, 'initial')"); err != nil {
		t.Fatal(err)
	}
	// The pattern: UPDATE ... SET lock_version = $fence WHERE ... AND lock_version <= $fence.
	update := func(value string, fence uint64) int64 {
		tag, err := pool.Exec(ctx, "UPDATE "+table+" SET value = $1, lock_version = $2 WHERE id = 1 AND lock_version <= $2",
			value, int64(fence))
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		return tag.RowsAffected()
	}
	key := "lockversion-" + randHex(4)
	a := req(key, "a", ttl)
	ga, err := s.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if n := update("by a", ga.Fence); n != 1 {
		t.Fatalf("holder a's write: %d rows, want 1", n)
	}
	if n := update("by a again", ga.Fence); n != 1 {
		t.Fatalf("holder a's second write: %d rows, want 1", n)
	}
	time.Sleep(ttl + 100*time.Millisecond) // a stalls; its lease expires
	b := req(key, "b", 10*ttl)
	gb, err := s.Acquire(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if n := update("by b", gb.Fence); n != 1 {
		t.Fatalf("holder b's write: %d rows, want 1", n)
	}
	if n := update("late write by a", ga.Fence); n != 0 {
		t.Errorf("stale holder a's late write (fence %d < %d): %d rows, want 0", ga.Fence, gb.Fence, n)
	}
	var value string
	var version int64
	if err := pool.QueryRow(ctx, "SELECT value, lock_version FROM "+table+" WHERE id = 1").Scan(&value, &version); err != nil {
		t.Fatal(err)
	}
	if value != "by b" || uint64(version) != gb.Fence {
		t.Errorf("row = %q version %d, want %q version %d", value, version, "by b", gb.Fence)
	}
}
