// The queue of waiters (lease.Queuer) beyond the leasetest FIFO subtests:
// Migrate upgrading an old database, long table names, the announcement when
// a waiter gives up on a free key, and the sweep of expired entries.

package pglease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/pglease"
)

// dropTables drops s's tables when the test ends.
func dropTables(t *testing.T, pool *pgxpool.Pool, s *pglease.Store) {
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
func queueRows(t *testing.T, ctx context.Context, pool *pgxpool.Pool, s *pglease.Store) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+s.QueueTable()+" WHERE ns = $1", s.Namespace()).Scan(&n); err != nil {
		t.Fatalf("count queue entries: %v", err)
	}
	return n
}

// TestQueueMigrateUpgrade: a database that has only the lease table of an
// earlier version (with a lease in it) gets the queue table from Migrate,
// twice without harm, and the lease and its fence survive.
func TestQueueMigrateUpgrade(t *testing.T) {
	pool := sharedPool(t)
	ctx := testCtx(t, 30*time.Second)
	name := "pglease_upgrade_" + randHex(4)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s := newStore(t, pool, mode, pglease.WithTable(name+"_"+mode.String()))
			dropTables(t, pool, s)
			old := `CREATE TABLE ` + s.Table() + ` (ns text NOT NULL, key text NOT NULL, token text,
				holder text NOT NULL DEFAULT '', fence bigint NOT NULL, expires_at timestamptz, pid integer,
				PRIMARY KEY (ns, key))`
			if _, err := pool.Exec(ctx, old); err != nil {
				t.Fatalf("create the old table: %v", err)
			}
			if _, err := pool.Exec(ctx, `INSERT INTO `+s.Table()+` (ns, key, token, holder, fence) VALUES ($1, 'k', NULL, '', 41)`,
				s.Namespace()); err != nil {
				t.Fatalf("old row: %v", err)
			}
			// Before Migrate, the queue table is missing: a clear error.
			if _, err := s.Acquire(ctx, req("k", "early", time.Second)); err == nil || !strings.Contains(err.Error(), "does not exist") {
				t.Fatalf("Acquire before Migrate: %v, want a 'does not exist' error", err)
			}
			for i := range 2 {
				if err := s.Migrate(ctx); err != nil {
					t.Fatalf("Migrate #%d: %v", i+1, err)
				}
			}
			a := req("k", "A", 5*time.Second)
			g, err := s.Acquire(ctx, a)
			if err != nil || g.Fence != 42 {
				t.Fatalf("Acquire after the upgrade = %+v, %v; want fence 42", g, err)
			}
			b := req("k", "B", 5*time.Second)
			leasetest.Queued(t, ctx, s, b, 0)
			if err := s.Release(ctx, a); err != nil {
				t.Fatalf("A's Release: %v", err)
			}
			b.Queue = true
			if g, err := s.Acquire(ctx, b); err != nil || g.Fence != 43 {
				t.Fatalf("B's Acquire = %+v, %v; want fence 43", g, err)
			}
			if n := queueRows(t, ctx, pool, s); n != 0 {
				t.Errorf("%d queue entries left after B acquired, want 0", n)
			}
		})
	}
}

// TestQueueLongTableName: with a lease table name of PostgreSQL's maximum
// length, the queue table's name is shortened with a hash (two such names
// with the same prefix do not collide) and works.
func TestQueueLongTableName(t *testing.T) {
	pool := sharedPool(t)
	ctx := testCtx(t, 30*time.Second)
	prefix := "pglease_long_" + randHex(4) + "_"
	var stores []*pglease.Store
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
			// B gives up on the key: in advisory mode it was free and
			// reserved for B; in table mode A's release handed it to B (the
			// store listens), and B's Release hands it on. Announced either
			// way, and C is now first.
			err := s.Release(ctx, b)
			if mode == pglease.ModeTable && err != nil {
				t.Fatalf("B's Release of the key handed to it = %v, want nil", err)
			}
			if mode == pglease.ModeAdvisory && !errors.Is(err, lease.ErrNotHeld) {
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
func quiet(t *testing.T, ctx context.Context, sub lease.Subscription, after string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if key, err := sub.Next(ctx); err == nil {
		t.Fatalf("an announcement of %q after: %s", key, after)
	}
}

// next returns the next announcement, bounded in time.
func next(t *testing.T, ctx context.Context, sub lease.Subscription) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	key, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return key
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

// TestQueueRaceExclusive: many Acquire calls, queued or not, race for fresh
// keys with a long TTL (no expiry can interfere): exactly one wins each key,
// and the losers that asked to be queued are, once each.
func TestQueueRaceExclusive(t *testing.T) {
	pool := sharedPool(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			s := newStore(t, pool, mode)
			const racers, rounds = 24, 10
			for round := range rounds {
				key := "race-" + randHex(4)
				var (
					wg     sync.WaitGroup
					won    atomic.Int64
					queued atomic.Int64
					start  = make(chan struct{})
				)
				for i := range racers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := req(key, "racer", 30*time.Second)
						r.Queue = i%2 == 0
						<-start
						_, err := s.Acquire(ctx, r)
						switch {
						case err == nil:
							won.Add(1)
						case errors.Is(err, lease.ErrHeld):
							if r.Queue {
								queued.Add(1)
							}
						default:
							t.Errorf("Acquire: %v", err)
						}
					}()
				}
				close(start)
				wg.Wait()
				if n := won.Load(); n != 1 {
					t.Fatalf("round %d: %d of %d racers won %s, want 1", round, n, racers, key)
				}
				var n int64
				if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+s.QueueTable()+" WHERE ns = $1 AND key = $2",
					s.Namespace(), key).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != queued.Load() {
					t.Fatalf("round %d: %d queue entries, %d refused racers asked to queue", round, n, queued.Load())
				}
			}
		})
	}
}
