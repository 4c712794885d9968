// AdvisoryStore's shared sessions: the leases of one TTL are held by one
// server session; a second token of the same session never takes a held key.

package pglease_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/pglease"
)

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
// through one store, live on two server sessions, and RenewMany renews them
// all; releasing some keeps the others.
func TestAdvisorySharedSession(t *testing.T) {
	pool := sharedPool(t)
	s := newStore(t, pool, pglease.ModeAdvisory)
	ctx := testCtx(t, 30*time.Second)
	var all []driver.Request
	for i := range 40 {
		r := req(fmt.Sprintf("k%d", i), "h", 5*time.Second)
		if i >= 30 {
			r.TTL = 7 * time.Second
		}
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatalf("Acquire %s: %v", r.Key, err)
		}
		all = append(all, r)
	}
	if pids := sessionPIDs(t, s); len(pids) != 2 {
		t.Fatalf("leases held by sessions %v, want 2 sessions (one per TTL)", pids)
	}
	for _, r := range all[:10] {
		if err := s.Release(ctx, r); err != nil {
			t.Fatalf("Release %s: %v", r.Key, err)
		}
	}
	for i, err := range s.RenewMany(ctx, all) {
		if held := i >= 10; held != (err == nil) {
			t.Errorf("RenewMany[%d] (held: %v): %v", i, held, err)
		}
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
