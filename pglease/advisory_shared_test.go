// AdvisoryStore's shared holds beyond the conformance suite: concurrent
// readers of separate sessions share one fence, one session's readers and
// writer exclude each other, and a reader whose session dies or whose entry
// another store cleared leaves at once.

package pglease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/pglease"
)

// TestAdvisoryReadersRaceShareFence: readers of 8 stores (8 sessions) rush
// a key a writer just left, or a key never taken: all are granted, with one
// fence above the writer's.
func TestAdvisoryReadersRaceShareFence(t *testing.T) {
	pool := sharedPool(t)
	ns := namespace(t)
	stores := make([]pglease.Store, 9)
	for i := range stores {
		stores[i] = storeNS(t, pool, pglease.ModeAdvisory, ns)
	}
	ctx := testCtx(t, 60*time.Second)
	const ttl = 10 * time.Second
	for round := range 6 {
		key, last := fmt.Sprintf("k%d", round/2), uint64(0)
		if round%2 == 1 { // the key's readers of the last round left: a writer takes it
			w := req(key, "w", ttl)
			g, err := stores[8].Acquire(ctx, w)
			if err != nil {
				t.Fatalf("round %d: writer: %v", round, err)
			}
			if err := stores[8].Release(ctx, w); err != nil {
				t.Fatal(err)
			}
			last = g.Fence
		}
		rs, fences, errs := make([]driver.Request, 8), make([]uint64, 8), make([]error, 8)
		var wg sync.WaitGroup
		for i := range 8 {
			rs[i] = asReader(req(key, fmt.Sprintf("r%d", i), ttl))
			wg.Add(1)
			go func() {
				defer wg.Done()
				g, err := stores[i].Acquire(ctx, rs[i])
				fences[i], errs[i] = g.Fence, err
			}()
		}
		wg.Wait()
		for i := range 8 {
			if errs[i] != nil || fences[i] != fences[0] || fences[i] <= last {
				t.Fatalf("round %d: readers' fences %v, errors %v; want one fence above %d, no error", round, fences, errs, last)
			}
		}
		if info, err := stores[8].Inspect(ctx, key); err != nil || info.Readers != 8 || info.Fence != fences[0] {
			t.Fatalf("round %d: Inspect = %+v, %v; want 8 readers, fence %d", round, info, err, fences[0])
		}
		for i := range 8 {
			if err := stores[i].Release(ctx, rs[i]); err != nil {
				t.Fatalf("round %d: Release of %s: %v", round, rs[i].Holder, err)
			}
		}
	}
}

// TestAdvisorySessionReadersAndWriter: on one session (one store, one TTL),
// whose locks are re-entrant, a writer is refused while a reader holds and
// a reader while a writer holds, and no lock level is left behind.
func TestAdvisorySessionReadersAndWriter(t *testing.T) {
	pool := sharedPool(t)
	s := newStore(t, pool, pglease.ModeAdvisory)
	other := newStore(t, pool, pglease.ModeAdvisory, pglease.WithNamespace(s.Namespace()))
	ctx := testCtx(t, 30*time.Second)
	const ttl = 5 * time.Second
	a, b, w := asReader(req("k", "A", ttl)), asReader(req("k", "B", ttl)), req("k", "W", ttl)
	ga, err := s.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	var held *lease.HeldError
	if _, err := s.Acquire(ctx, w); !errors.As(err, &held) || held.Holder != "A" || held.Fence != ga.Fence {
		t.Fatalf("writer through reader A's session: %v, want HeldError naming A, fence %d", err, ga.Fence)
	}
	if gb, err := s.Acquire(ctx, b); err != nil || gb.Fence != ga.Fence {
		t.Fatalf("reader B through A's session: %+v, %v; want fence %d", gb, err, ga.Fence)
	}
	x := req("x", "X", ttl) // a writer of another key on the session: renewed with the readers
	if _, err := s.Acquire(ctx, x); err != nil {
		t.Fatal(err)
	}
	for i, err := range s.RenewMany(ctx, []driver.Request{a, x, b}) {
		if err != nil {
			t.Fatalf("RenewMany of readers and a writer [%d]: %v", i, err)
		}
	}
	for _, r := range []driver.Request{a, b} {
		if err := s.Release(ctx, r); err != nil {
			t.Fatalf("Release of %s: %v", r.Holder, err)
		}
	}
	gw, err := s.Acquire(ctx, w)
	if err != nil || gw.Fence <= ga.Fence {
		t.Fatalf("writer after the readers: %+v, %v; want a fence above %d", gw, err, ga.Fence)
	}
	if _, err := s.Acquire(ctx, a); !errors.As(err, &held) || held.Holder != "W" {
		t.Fatalf("reader through writer W's session: %v, want HeldError naming W", err)
	}
	if err := s.Release(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, req("k", "D", ttl)); err != nil {
		t.Fatalf("writer of another session at the end: %v, want the key (no lock level left behind)", err)
	}
}

// TestAdvisoryReaderLeavesAtOnce: a reader whose session is terminated, and
// one whose entry another store released, no longer hold: a writer gets the
// key at once (the second once its session's renewal gave the lock up).
func TestAdvisoryReaderLeavesAtOnce(t *testing.T) {
	pool := sharedPool(t)
	s := newStore(t, pool, pglease.ModeAdvisory)
	other := newStore(t, pool, pglease.ModeAdvisory, pglease.WithNamespace(s.Namespace()))
	ctx := testCtx(t, 30*time.Second)
	const ttl = 10 * time.Second
	killed, stay := asReader(req("k", "killed", ttl)), asReader(req("k", "stay", 2*ttl))
	g, err := s.Acquire(ctx, killed)
	if err == nil {
		_, err = s.Acquire(ctx, stay)
	}
	if err != nil {
		t.Fatal(err)
	}
	var pid int32
	if err := pool.QueryRow(ctx, "SELECT (readers->$3->>2)::int FROM "+s.Table()+" WHERE ns = $1 AND key = $2",
		s.Namespace(), "k", killed.Token).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1, 5000)", pid); err != nil {
		t.Fatal(err)
	}
	if info, err := other.Inspect(ctx, "k"); err != nil || info.Readers != 1 || info.Holder != "stay" || info.Fence != g.Fence {
		t.Fatalf("Inspect after the reader's session ended = %+v, %v; want reader stay alone, fence %d", info, err, g.Fence)
	}
	if err := other.Release(ctx, stay); err != nil {
		t.Fatalf("Release of reader stay through another store: %v", err)
	}
	if info, err := other.Inspect(ctx, "k"); err != nil || info.Held {
		t.Fatalf("Inspect after the last reader's release = %+v, %v; want free", info, err)
	}
	if err := s.Renew(ctx, stay); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Renew of the reader released elsewhere = %v, want ErrNotHeld", err)
	}
	if gw, err := other.Acquire(ctx, req("k", "W", ttl)); err != nil || gw.Fence <= g.Fence {
		t.Fatalf("writer after the readers: %+v, %v; want a fence above %d", gw, err, g.Fence)
	}
}

// ref is a LeaseRef of a store-level grant.
type ref struct {
	r     driver.Request
	fence uint64
}

func (l ref) Key() string   { return l.r.Key }
func (l ref) Token() string { return l.r.Token }
func (l ref) Fence() uint64 { return l.fence }

// TestAdvisoryReaderFencedTx: a live reader's FencedTx runs; once it has
// released, or with a foreign token, it is rejected.
func TestAdvisoryReaderFencedTx(t *testing.T) {
	pool := sharedPool(t)
	s := newStore(t, pool, pglease.ModeAdvisory)
	ctx := testCtx(t, 30*time.Second)
	r := asReader(req("k", "R", 10*time.Second))
	g, err := s.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, pgx.Tx) error { return nil }
	if err := s.FencedTx(ctx, ref{r, g.Fence}, ok); err != nil {
		t.Fatalf("a live reader's FencedTx: %v", err)
	}
	foreign := ref{asReader(req("k", "F", time.Second)), g.Fence}
	if err := s.FencedTx(ctx, foreign, ok); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("FencedTx with a foreign token = %v, want ErrNotHeld", err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.FencedTx(ctx, ref{r, g.Fence}, ok); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("a released reader's FencedTx = %v, want ErrNotHeld", err)
	}
}

// TestAdvisoryWriterLeavesReaders: a waiting writer that gives up while
// readers hold announces the key, naming nobody, and the reader queued
// behind it joins them.
func TestAdvisoryWriterLeavesReaders(t *testing.T) {
	pool := sharedPool(t)
	s := newStore(t, pool, pglease.ModeAdvisory)
	other := newStore(t, pool, pglease.ModeAdvisory, pglease.WithNamespace(s.Namespace()))
	ctx := testCtx(t, 30*time.Second)
	sub := subscribe(t, ctx, s)
	const ttl = 10 * time.Second
	r1, w, r2 := asReader(req("k", "r1", ttl)), req("k", "w", ttl), asReader(req("k", "r2", ttl))
	w.Queue, r2.Queue = true, true
	g, err := s.Acquire(ctx, r1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []driver.Request{w, r2} {
		if _, err := other.Acquire(ctx, r); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("queued Acquire of %s = %v, want ErrHeld", r.Holder, err)
		}
	}
	if err := other.Release(ctx, w); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("the waiting writer's Release = %v, want ErrNotHeld", err)
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if a, err := sub.Next(actx); err != nil || a.Key != "k" || a.Next != "" {
		t.Fatalf("announcement after the writer left = %+v, %v; want k, naming nobody", a, err)
	}
	if g2, err := other.Acquire(ctx, r2); err != nil || g2.Fence != g.Fence {
		t.Fatalf("r2 after the writer left: %+v, %v; want r1's fence %d", g2, err, g.Fence)
	}
}
