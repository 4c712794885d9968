// Hand-off in table mode: a release gives the key to the first waiter whose
// store listens, and that store grants it from the announcement with no
// statement; a waiter giving up while a release hands it the key frees it
// again; a queue table of an earlier version gets the hand-off columns.

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
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/pglease"
)

// queryCounter counts the statements sent through a pool.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// handOffPair returns a table-mode store on the shared pool and a second
// store of the same namespace on a pool of its own, whose statements are
// counted.
func handOffPair(t *testing.T) (*pglease.Store, *pglease.Store, *queryCounter) {
	t.Helper()
	sA := newStore(t, sharedPool(t), pglease.ModeTable)
	cfg, err := pgxpool.ParseConfig(sharedDSN(t))
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	qc := &queryCounter{}
	cfg.ConnConfig.Tracer = qc
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(testCtx(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("pgxpool: %v", err)
	}
	t.Cleanup(pool.Close)
	return sA, storeNS(t, pool, pglease.ModeTable, sA.Namespace()), qc
}

// subscribe subscribes to s's announcements until the test ends.
func subscribe(t *testing.T, s *pglease.Store) lease.Subscription {
	t.Helper()
	sub, err := s.Subscribe(testCtx(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// announcement reads sub's next announcement within 10 s.
func announcement(t *testing.T, ctx context.Context, sub lease.Subscription) lease.Announcement {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	a, err := sub.(lease.Announcer).NextAnnouncement(ctx)
	if err != nil {
		t.Fatalf("NextAnnouncement: %v", err)
	}
	return a
}

// heldBy checks that Inspect shows key held by holder, and returns its fence.
func heldBy(t *testing.T, ctx context.Context, s lease.Store, key, holder string) uint64 {
	t.Helper()
	info, err := s.Inspect(ctx, key)
	if err != nil || !info.Held || info.Holder != holder {
		t.Fatalf("Inspect(%q) = %+v, %v; want held by %s", key, info, err, holder)
	}
	return info.Fence
}

// releaseTo acquires a through sA, queues the waiters through sB in that
// order, and releases a.
func releaseTo(t *testing.T, ctx context.Context, sA, sB lease.Store, a lease.Request, waiters ...lease.Request) {
	t.Helper()
	if _, err := sA.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	for i, w := range waiters {
		wantQueued(t, ctx, sB, w, i)
	}
	if err := sA.Release(ctx, a); err != nil {
		t.Fatalf("%s's Release: %v", a.Holder, err)
	}
}

// TestHandOff: A's release hands the key to B, queued through a store that
// listens: the key carries B's holder and a larger fence at once, B's store
// grants B's Acquire with no statement (Since counts from B's first
// queueing request), and B renews and releases it as its own.
func TestHandOff(t *testing.T) {
	sA, sB, qc := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	sub := subscribe(t, sB)
	ttl := 10 * time.Second
	a, b := req("k", "A", ttl), req("k", "B", ttl)
	ga, err := sA.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	queuedAt := time.Now()
	wantQueued(t, ctx, sB, b, 0)
	time.Sleep(20 * time.Millisecond)
	wantQueued(t, ctx, sB, b, 0) // a refresh: Since still counts from the first
	if err := sA.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	fence := heldBy(t, ctx, sA, "k", "B")
	if fence != ga.Fence+1 {
		t.Fatalf("handed fence %d, want A's %d + 1", fence, ga.Fence)
	}
	if an := announcement(t, ctx, sub); an.Key != "k" || an.Next != b.Token {
		t.Fatalf("announcement %+v, want key k with B next", an)
	}
	before := qc.n.Load()
	b.Queue = true
	g, err := sB.Acquire(ctx, b)
	if err != nil || g.Fence != fence {
		t.Fatalf("B's Acquire = %+v, %v; want fence %d", g, err, fence)
	}
	if n := qc.n.Load() - before; n != 0 {
		t.Errorf("B's Acquire sent %d statements, want none", n)
	}
	if since := time.Since(queuedAt); g.Since < 20*time.Millisecond || g.Since > since {
		t.Errorf("Since = %v, want the time since B's first queueing request (%v, at least 20ms)", g.Since, since)
	}
	if err := sB.Renew(ctx, b); err != nil {
		t.Fatalf("B's Renew: %v", err)
	}
	if f := heldBy(t, ctx, sA, "k", "B"); f != fence {
		t.Errorf("fence after B's renewal %d, want %d", f, fence)
	}
	if err := sA.Release(ctx, a); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("A's second Release = %v, want ErrNotHeld", err)
	}
	if err := sB.Release(ctx, b); err != nil {
		t.Fatalf("B's Release: %v", err)
	}
	if info, err := sA.Inspect(ctx, "k"); err != nil || info.Held {
		t.Fatalf("after B's Release Inspect = %+v, %v; want free", info, err)
	}
}

// TestHandOffUnread: a waiter whose store has not read the announcement
// yet (or missed it) asks the server, which grants it the fence it was
// handed; a second Acquire keeps it.
func TestHandOffUnread(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	subscribe(t, sB)
	ttl := 10 * time.Second
	a, b := req("k", "A", ttl), req("k", "B", ttl)
	releaseTo(t, ctx, sA, sB, a, b)
	fence := heldBy(t, ctx, sA, "k", "B")
	b.Queue = true
	for i := range 2 {
		if g, err := sB.Acquire(ctx, b); err != nil || g.Fence != fence || g.Since != 0 {
			t.Fatalf("B's Acquire #%d = %+v, %v; want fence %d from the server", i+1, g, err, fence)
		}
	}
}

// TestHandOffNotListening: a waiter whose store has no subscription is not
// handed the key (it would not hear of it): the release frees the key,
// reserved for that waiter, as in leasetest's FIFO tests.
func TestHandOffNotListening(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	subscribe(t, sA) // the releaser listening does not matter
	ttl := 10 * time.Second
	a, b := req("k", "A", ttl), req("k", "B", ttl)
	releaseTo(t, ctx, sA, sB, a, b)
	if info, err := sA.Inspect(ctx, "k"); err != nil || info.Held {
		t.Fatalf("Inspect = %+v, %v; want free (reserved for B)", info, err)
	}
	b.Queue = true
	if _, err := sB.Acquire(ctx, b); err != nil {
		t.Fatalf("B's Acquire: %v", err)
	}
}

// TestHandOffGiveUp: a waiter handed the key that gives up releases it, and
// the key is handed on to the next listening waiter.
func TestHandOffGiveUp(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	subB := subscribe(t, sB)
	ttl := 10 * time.Second
	a, b, c := req("k", "A", ttl), req("k", "B", ttl), req("k", "C", ttl)
	releaseTo(t, ctx, sA, sB, a, b, c)
	fb := heldBy(t, ctx, sA, "k", "B")
	if an := announcement(t, ctx, subB); an.Next != b.Token {
		t.Fatalf("announcement %+v, want B next", an)
	}
	if err := sB.Release(ctx, b); err != nil {
		t.Fatalf("B's Release of the key handed to it: %v", err)
	}
	if fc := heldBy(t, ctx, sA, "k", "C"); fc != fb+1 {
		t.Fatalf("C's fence %d, want B's %d + 1", fc, fb)
	}
	if an := announcement(t, ctx, subB); an.Next != c.Token {
		t.Fatalf("announcement %+v, want C next", an)
	}
	b.Queue = true
	if _, err := sB.Acquire(ctx, b); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("B's Acquire after giving up = %v, want ErrHeld", err)
	}
	c.Queue = true
	if _, err := sB.Acquire(ctx, c); err != nil {
		t.Fatalf("C's Acquire: %v", err)
	}
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
	subscribe(t, sB)
	ttl := 10 * time.Second
	a, b, c := req("k", "A", ttl), req("k", "B", ttl), req("k", "C", ttl)
	if _, err := sA.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, ctx, sB, b, 0)
	wantQueued(t, ctx, sB, c, 1)
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
	heldBy(t, ctx, sA, "k", "C")
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

// TestHandOffToDeadWaiter: a key handed to a waiter that died expires its
// TTL after the hand-off, like a dead holder's.
func TestHandOffToDeadWaiter(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	subscribe(t, sB)
	a, b := req("k", "A", 10*time.Second), req("k", "B", 500*time.Millisecond)
	releaseTo(t, ctx, sA, sB, a, b)
	heldBy(t, ctx, sA, "k", "B")
	leasetest.AwaitFree(t, ctx, sA, "k", 5*time.Second, 50*time.Millisecond)
	if _, err := sA.Acquire(ctx, req("k", "D", time.Second)); err != nil {
		t.Fatalf("Acquire after the dead waiter's TTL: %v", err)
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
	subscribe(t, s)
	wantQueued(t, ctx, s, b, 1) // behind the old waiter
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
	wantQueued(t, ctx, s, c, 0)
	if err := s.Release(ctx, b); err != nil {
		t.Fatalf("B's Release: %v", err)
	}
	if f := heldBy(t, ctx, s, "k", "C"); f != 9 {
		t.Fatalf("C handed fence %d, want 9", f)
	}
}
