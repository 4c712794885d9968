// Hand-off in table mode: a release gives the key to the first waiter whose
// store listens and wakes it, and the waiter takes the key with its own
// statement (the shared suite, handofftest); a forged announcement grants
// nothing; a waiter giving up while a release hands it the key frees it
// again; a queue table of an earlier version gets the hand-off columns.

package pglease_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/handofftest"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/pglease"
)

// handOffPair returns a table-mode store on the shared pool and a second
// store of the same namespace on a pool of its own, whose statements are
// counted.
func handOffPair(t *testing.T) (*pglease.Store, *pglease.Store, *statementCounter) {
	t.Helper()
	sA := newStore(t, sharedPool(t), pglease.ModeTable)
	pool, sc := countingPool(t, 4)
	return sA, storeNS(t, pool, pglease.ModeTable, sA.Namespace()), sc
}

// TestHandOff runs the shared hand-off suite on table mode.
func TestHandOff(t *testing.T) {
	handofftest.Run(t, handofftest.Harness{
		Pair: func(t *testing.T) (lease.Store, lease.Store, func() int) {
			sA, sB, sc := handOffPair(t)
			return sA, sB, func() int { return int(sc.n.Load()) }
		},
	})
}

// TestForgedHandOffGrantsNothing: a role that may only SELECT the lease and
// queue tables reads the token first in a key's queue (an entry that asks
// for a hand-off: its store listens) and calls pg_notify on the store's
// channel with the payload of a hand-off to it with the largest fence. The
// waiter is granted nothing, through the Store or a lease.Client: the key
// stays its holder's, and the waiter gets it, with the server's fence, only
// after the real release (handofftest.Forged). The shared server's role may
// not create roles, so the test runs on a private server.
func TestForgedHandOffGrantsNothing(t *testing.T) {
	pg := startPrivatePG(t)
	pair := func(t *testing.T) (lease.Store, lease.Store, func() int) {
		poolA, poolB := newPool(t, pg.DSN(), 4), newPool(t, pg.DSN(), 4)
		migrate(t, poolA)
		sA := newStore(t, poolA, pglease.ModeTable)
		return sA, storeNS(t, poolB, pglease.ModeTable, sA.Namespace()), func() int { return 0 }
	}
	forgers := make(map[*testing.T]*pgxpool.Pool) // one role per subtest
	handofftest.Forged(t, handofftest.Harness{Pair: pair}, func(t *testing.T, ctx context.Context, waiters lease.Store, key string, fence uint64) string {
		s := waiters.(*pglease.Store)
		forger, ok := forgers[t]
		if !ok {
			forger = selectOnlyPool(t, ctx, pg, s)
			forgers[t] = forger
		}
		var head string
		err := forger.QueryRow(ctx, "SELECT token FROM "+s.QueueTable()+
			" WHERE ns = $1 AND key = $2 AND grant_ttl IS NOT NULL ORDER BY seq LIMIT 1", s.Namespace(), key).Scan(&head)
		if errors.Is(err, pgx.ErrNoRows) {
			return ""
		}
		if err != nil {
			t.Fatalf("the forger reads the queue: %v", err)
		}
		if _, err := forger.Exec(ctx, "UPDATE "+s.Table()+" SET token = $1", head); err == nil {
			t.Fatal("the SELECT-only role could UPDATE the lease table")
		}
		payload := head + " " + strconv.FormatUint(fence, 10) + "\n" + key
		if _, err := forger.Exec(ctx, "SELECT pg_notify($1, $2)", s.Channel(), payload); err != nil {
			t.Fatalf("the forger notifies: %v", err)
		}
		return head
	})
}

// selectOnlyPool creates on pg a role that may log in and SELECT s's tables,
// and nothing else, and returns a pool logged in as it; the role is dropped
// when the test ends.
func selectOnlyPool(t *testing.T, ctx context.Context, pg *privatePG, s *pglease.Store) *pgxpool.Pool {
	t.Helper()
	admin := newPool(t, pg.DSN(), 2)
	role := "leasekit_forger_" + randHex(4)
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT SELECT ON " + s.Table() + ", " + s.QueueTable() + " TO " + role,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, q := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	return newPool(t, strings.Replace(pg.DSN(), "//postgres@", "//"+role+"@", 1), 2)
}

// TestHandOffGiveUpDuringRelease: a waiter's give-up whose statement
// started before the release that hands it the key committed still frees
// the key (here, hands it on to the next waiter) instead of leaving it held
// by a token nobody uses until its TTL. The test holds the key's row lock
// in a transaction of its own until both statements wait for it, the
// release first.
func TestHandOffGiveUpDuringRelease(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	pool := sharedPool(t)
	ctx := testCtx(t, 30*time.Second)
	handofftest.Subscribe(t, sB)
	ttl := 10 * time.Second
	a, b, c := req("k", "A", ttl), req("k", "B", ttl), req("k", "C", ttl)
	if _, err := sA.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	leasetest.Queued(t, ctx, sB, b, 0)
	leasetest.Queued(t, ctx, sB, c, 1)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+sA.Table()+" WHERE ns = $1 AND key = 'k' FOR UPDATE", sA.Namespace()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- sA.Release(ctx, a) }()
	awaitLockWaiters(t, ctx, pool, 1)
	go func() { done <- sB.Release(ctx, b) }()
	awaitLockWaiters(t, ctx, pool, 2)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("Release: %v (A's hands the key to B, B's gives it up)", err)
		}
	}
	handofftest.HeldBy(t, ctx, sA, "k", "C")
}

// awaitLockWaiters waits until n statements of the database wait for a
// lock.
func awaitLockWaiters(t *testing.T, ctx context.Context, pool *pgxpool.Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH lk AS%'`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d statements wait for the row lock after 10s, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHandOffMigrateUpgrade: a queue table of an earlier version (without
// the hand-off columns, with a waiter in it) gets them from Migrate, twice
// without harm, and the waiter keeps its place and is handed the key.
func TestHandOffMigrateUpgrade(t *testing.T) {
	pool := sharedPool(t)
	ctx := testCtx(t, 30*time.Second)
	s := newStore(t, pool, pglease.ModeTable, pglease.WithTable("pglease_handoff_upgrade_"+randHex(4)))
	dropTables(t, pool, s)
	old := []string{
		`CREATE TABLE ` + s.Table() + ` (ns text NOT NULL, key text NOT NULL, token text,
			holder text NOT NULL DEFAULT '', fence bigint NOT NULL, expires_at timestamptz, pid integer,
			PRIMARY KEY (ns, key))`,
		`CREATE TABLE ` + s.QueueTable() + ` (ns text NOT NULL, key text NOT NULL, token text NOT NULL,
			seq bigserial NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (ns, key, token))`,
	}
	for _, q := range old {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("create the old tables: %v", err)
		}
	}
	a, b := req("k", "A", 5*time.Second), req("k", "B", 5*time.Second)
	if _, err := pool.Exec(ctx, `INSERT INTO `+s.Table()+` (ns, key, token, holder, fence, expires_at)
		VALUES ($1, 'k', $2, 'A', 7, now() + interval '5 seconds')`, s.Namespace(), a.Token); err != nil {
		t.Fatalf("old lease: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+s.QueueTable()+` (ns, key, token, expires_at)
		VALUES ($1, 'k', $2, now() + interval '5 seconds')`, s.Namespace(), token()); err != nil {
		t.Fatalf("old waiter: %v", err)
	}
	for i := range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate #%d: %v", i+1, err)
		}
	}
	handofftest.Subscribe(t, s)
	leasetest.Queued(t, ctx, s, b, 1) // behind the old waiter
	if err := s.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	// The old waiter left no hand-off TTL: the key is freed, reserved for it.
	if info, err := s.Inspect(ctx, "k"); err != nil || info.Held || info.Fence != 7 {
		t.Fatalf("Inspect = %+v, %v; want free with fence 7", info, err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM `+s.QueueTable()+` WHERE ns = $1 AND token <> $2`, s.Namespace(), b.Token); err != nil {
		t.Fatal(err)
	}
	b.Queue = true
	if g, err := s.Acquire(ctx, b); err != nil || g.Fence != 8 {
		t.Fatalf("B's Acquire = %+v, %v; want fence 8", g, err)
	}
	c := req("k", "C", 5*time.Second)
	leasetest.Queued(t, ctx, s, c, 0)
	if err := s.Release(ctx, b); err != nil {
		t.Fatalf("B's Release: %v", err)
	}
	if f := handofftest.HeldBy(t, ctx, s, "k", "C"); f != 9 {
		t.Fatalf("C handed fence %d, want 9", f)
	}
}
