// Shared holds on the Redis store: readers, their fence and the queue.

package redislease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

func TestSharedHolds(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	sub, err := s.Subscribe(testCtx(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx := testCtx(t, time.Minute)
	shared := func(r driver.Request) driver.Request { r.Shared = true; return r }
	queued := func(r driver.Request) driver.Request { r.Queue = true; return r }
	r1 := shared(req("k", token(t), "r1", time.Minute))
	r2 := shared(req("k", token(t), "r2", 2*time.Minute))
	g1, err := s.Acquire(ctx, r1)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := s.Acquire(ctx, r2)
	if err != nil || g2.Fence != g1.Fence {
		t.Fatalf("second reader: %+v, %v; want fence %d", g2, err, g1.Fence)
	}
	if g, err := s.Acquire(ctx, r1); err != nil || g.Fence != g1.Fence {
		t.Fatalf("reader again: %+v, %v", g, err)
	}
	info, err := s.Inspect(ctx, "k")
	if err != nil || !info.Held || !info.Shared || info.Readers != 2 || info.Holder != "r2" || info.Fence != g1.Fence ||
		info.Remaining < time.Minute {
		t.Fatalf("Inspect = %+v, %v", info, err)
	}
	// A writer queues; a later reader queues behind it.
	w := queued(req("k", token(t), "w", time.Minute))
	var he *lease.HeldError
	if _, err := s.Acquire(ctx, w); !errors.As(err, &he) || he.Holder != "r2" || he.Fence != g1.Fence || he.Remaining < time.Minute || he.Queued != 0 {
		t.Fatalf("writer = %v", err)
	}
	r3 := queued(shared(req("k", token(t), "r3", time.Minute)))
	if _, err := s.Acquire(ctx, r3); !errors.As(err, &he) || he.Queued != 1 {
		t.Fatalf("late reader = %v", err)
	}
	if err := s.Renew(ctx, r1); err != nil {
		t.Fatal(err)
	}
	if errs := s.RenewMany(ctx, []driver.Request{r1, w, r2}); errs[0] != nil || !errors.Is(errs[1], lease.ErrNotHeld) || errs[2] != nil {
		t.Fatalf("RenewMany = %v", errs)
	}
	if err := s.Release(ctx, r2); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Inspect(ctx, "k"); err != nil || info.Readers != 1 || info.Holder != "r1" || info.Remaining > time.Minute {
		t.Fatalf("after r2 left: %+v, %v", info, err)
	}
	if err := s.Release(ctx, r1); err != nil {
		t.Fatal(err)
	}
	if an, err := sub.Next(ctx); err != nil || an.Key != "k" || an.Next != w.Token {
		t.Fatalf("announcement %+v, %v", an, err)
	}
	if _, err := s.Acquire(ctx, r3); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("late reader before the writer = %v", err)
	}
	gw, err := s.Acquire(ctx, w)
	if err != nil || gw.Fence <= g1.Fence {
		t.Fatalf("writer = %+v, %v", gw, err)
	}
	if err := s.Release(ctx, w); err != nil {
		t.Fatal(err)
	}
	if an, err := sub.Next(ctx); err != nil || an.Key != "k" || an.Next != "" {
		t.Fatalf("announcement %+v, %v", an, err)
	}
	g3, err := s.Acquire(ctx, r3)
	if err != nil || g3.Fence <= gw.Fence {
		t.Fatalf("reader after the writer = %+v, %v", g3, err)
	}
	if err := s.Release(ctx, r1); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("old reader's Release = %v", err)
	}
	// A writer queued ahead of a reader gives up: the reader may join, and
	// the announcement names nobody.
	w2 := queued(req("k", token(t), "w2", time.Minute))
	r5 := queued(shared(req("k", token(t), "r5", time.Minute)))
	for _, r := range []driver.Request{w2, r5} {
		if _, err := s.Acquire(ctx, r); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("%s = %v, want queued", r.Holder, err)
		}
	}
	if err := s.Release(ctx, w2); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("the writer leaving the queue: %v", err)
	}
	if an, err := sub.Next(ctx); err != nil || an.Key != "k" || an.Next != "" {
		t.Fatalf("announcement %+v, %v", an, err)
	}
	if g, err := s.Acquire(ctx, r5); err != nil || g.Fence != g3.Fence {
		t.Fatalf("r5 = %+v, %v; want fence %d", g, err, g3.Fence)
	}
	if err := s.Release(ctx, r5); err != nil {
		t.Fatal(err)
	}
	// A short reader expires alone.
	r4 := shared(req("k", token(t), "r4", 50*time.Millisecond))
	if _, err := s.Acquire(ctx, r4); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := s.Renew(ctx, r4); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("expired reader's Renew = %v", err)
	}
	if info, err := s.Inspect(ctx, "k"); err != nil || info.Readers != 1 || info.Holder != "r3" {
		t.Fatalf("after r4 expired: %+v, %v", info, err)
	}
}
