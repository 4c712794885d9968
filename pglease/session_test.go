// AdvisoryStore's shared sessions: the leases of one TTL are held by one
// server session, renewed in one statement, and lost together when that
// session dies; a second token of the same session never takes a held key.

package pglease_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/pglease"
)

// statementCounter counts the round trips sent on a pool's connections: each
// statement, and each batch as one (hijacked connections included: the
// tracer is part of each connection's config).
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func countingPool(t *testing.T, maxConns int32) (*pgxpool.Pool, *statementCounter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(sharedDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	sc := &statementCounter{}
	cfg.ConnConfig.Tracer = sc
	pool, err := pgxpool.NewWithConfig(testCtx(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrate(t, pool)
	return pool, sc
}

// sessionPIDs returns the distinct server processes named by the rows of
// the store's held keys.
func sessionPIDs(t *testing.T, s pglease.Store) map[int32]int {
	t.Helper()
	rows, err := sharedPool(t).Query(testCtx(t, 5*time.Second),
		"SELECT pid FROM "+s.Table()+" WHERE ns = $1 AND token IS NOT NULL", s.Namespace())
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	m := map[int32]int{}
	for _, p := range pids {
		m[p]++
	}
	return m
}

// TestAdvisorySharedSession: 30 leases of one TTL and 10 of another,
// through one store, live on two server sessions; RenewMany renews each
// session's leases in one statement; releasing some keeps the others.
func TestAdvisorySharedSession(t *testing.T) {
	pool, sc := countingPool(t, 8)
	s := newStore(t, pool, pglease.ModeAdvisory)
	ctx := testCtx(t, 30*time.Second)
	var short, long []driver.Request
	for i := range 40 {
		r := req(fmt.Sprintf("k%d", i), "h", 5*time.Second)
		if i >= 30 {
			r.TTL = 7 * time.Second
			long = append(long, r)
		} else {
			short = append(short, r)
		}
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatalf("Acquire %s: %v", r.Key, err)
		}
	}
	pids := sessionPIDs(t, s)
	if len(pids) != 2 {
		t.Fatalf("leases held by sessions %v, want 2 sessions (one per TTL)", pids)
	}
	all := append(append([]driver.Request{}, short...), long...)
	before := sc.n.Load()
	for i, err := range s.RenewMany(ctx, all) {
		if err != nil {
			t.Errorf("RenewMany[%d]: %v", i, err)
		}
	}
	if n := sc.n.Load() - before; n != 2 {
		t.Errorf("RenewMany of 40 leases on 2 sessions sent %d statements, want 2", n)
	}
	for _, r := range short[:10] {
		if err := s.Release(ctx, r); err != nil {
			t.Fatalf("Release %s: %v", r.Key, err)
		}
	}
	for i, err := range s.RenewMany(ctx, all[10:]) {
		if err != nil {
			t.Errorf("RenewMany after releases [%d]: %v", i, err)
		}
	}
	other := newStore(t, pool, pglease.ModeAdvisory)
	for _, r := range short[:10] {
		if info, err := other.Inspect(ctx, r.Key); err != nil || info.Held {
			t.Errorf("released %s: Inspect = %+v, %v; want free", r.Key, info, err)
		}
	}
	for _, r := range all[10:] {
		if info, err := s.Inspect(ctx, r.Key); err != nil || !info.Held {
			t.Errorf("kept %s: Inspect = %+v, %v; want held", r.Key, info, err)
		}
	}
}

// TestAdvisorySessionDies: terminating the shared session loses every lease
// on it (reported at the next renewal, ErrNotHeld) and frees their keys; the
// store opens a new session for the next acquisition.
func TestAdvisorySessionDies(t *testing.T) {
	pool := sharedPool(t)
	s := newStore(t, pool, pglease.ModeAdvisory)
	ctx := testCtx(t, 30*time.Second)
	var rs []driver.Request
	for i := range 5 {
		r := req(fmt.Sprintf("k%d", i), "h", 5*time.Second)
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	var pid int32
	for p := range sessionPIDs(t, s) {
		pid = p
	}
	var ok bool
	if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v, %v", pid, ok, err)
	}
	for i, err := range s.RenewMany(ctx, rs) {
		if !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("RenewMany[%d] after the session died: %v, want ErrNotHeld", i, err)
		}
	}
	other := newStore(t, pool, pglease.ModeAdvisory, pglease.WithNamespace(s.Namespace()))
	for _, r := range rs {
		o := req(r.Key, "other", 5*time.Second)
		if _, err := other.Acquire(ctx, o); err != nil {
			t.Errorf("%s after its session died: %v, want free", r.Key, err)
		}
	}
	if _, err := s.Acquire(ctx, req("fresh", "h", 5*time.Second)); err != nil {
		t.Errorf("Acquire on a new session: %v", err)
	}
}

// TestAdvisoryReentrantGuard: a second token through the same store (same
// session) cannot take a key the session holds for another token, though
// the session's try would succeed; it queues and gets the key at the
// release, and once it releases another store acquires: no lock level was
// left behind.
func TestAdvisoryReentrantGuard(t *testing.T) {
	pool := sharedPool(t)
	s := newStore(t, pool, pglease.ModeAdvisory)
	ns := s.Namespace()
	other := newStore(t, pool, pglease.ModeAdvisory, pglease.WithNamespace(ns))
	ctx := testCtx(t, 30*time.Second)
	ttl := 5 * time.Second
	a, b := req("k", "A", ttl), req("k", "B", ttl)
	if _, err := s.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	b.Queue = true
	var held *lease.HeldError
	if _, err := s.Acquire(ctx, b); !errors.As(err, &held) || held.Holder != "A" {
		t.Fatalf("B through A's session: %v, want HeldError naming A", err)
	}
	if err := s.Renew(ctx, a); err != nil {
		t.Fatalf("A's Renew after B's attempt: %v", err)
	}
	if err := s.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, b); err != nil {
		t.Fatalf("B, first in the queue, after A's release: %v", err)
	}
	if _, err := other.Acquire(ctx, req("k", "D", ttl)); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("D while B holds: %v, want ErrHeld", err)
	}
	if err := s.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, req("k", "D", ttl)); err != nil {
		t.Fatalf("D after B's release: %v, want the key (no lock level left behind)", err)
	}
}
