// Redis-specific parts of the FIFO queue: its two sorted sets expire with
// their last entry, so a key whose waiters all died leaves nothing behind;
// a release that frees a key for a waiter of a listening store wakes only
// that store's subscriptions.

package redislease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/redislease"
)

func TestQueueAbandonedVanishes(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	a := req("k", token(t), "A", time.Minute)
	if _, err := s.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	lk := leaseKey(s.Prefix(), "k")
	for _, ttl := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		w := req("k", token(t), "dead", ttl)
		w.Queue = true
		if _, err := s.Acquire(ctx, w); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("queued Acquire = %v, want ErrHeld", err)
		}
	}
	for _, k := range []string{lk + ":q", lk + ":qx"} {
		if ms := c.PTTL(ctx, k).Val(); ms <= 300*time.Millisecond || ms > 600*time.Millisecond {
			t.Errorf("PTTL %s = %v, want the latest entry's expiry, 600ms", k, ms)
		}
	}
	time.Sleep(700 * time.Millisecond)
	if n := c.Exists(ctx, lk+":q", lk+":qx").Val(); n != 0 {
		t.Errorf("%d queue keys left after every waiter died, want none", n)
	}
}

func TestReleaseWakesOnlyTheWaitersStore(t *testing.T) {
	c := sharedClient(t)
	holder := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	var subs []driver.Subscription
	var stores []*redislease.Store
	for range 2 {
		s, err := redislease.New(newClient(t, c.Options().Addr), redislease.WithPrefix(holder.Prefix()))
		if err != nil {
			t.Fatal(err)
		}
		sub, err := s.Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Close() })
		stores, subs = append(stores, s), append(subs, sub)
	}
	next := func(sub driver.Subscription, d time.Duration) (driver.Announcement, error) {
		nctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return sub.Next(nctx)
	}
	a, b := req("k", token(t), "A", time.Minute), req("k", token(t), "B", time.Minute)
	b.Queue = true
	if _, err := holder.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[0].Acquire(ctx, b); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("B's queued Acquire = %v, want ErrHeld", err)
	}
	if err := holder.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if an, err := next(subs[0], 10*time.Second); err != nil || an != (driver.Announcement{Key: "k", Next: b.Token}) {
		t.Fatalf("B's store heard %+v, %v; want k, next B", an, err)
	}
	if an, err := next(subs[1], 300*time.Millisecond); err == nil {
		t.Fatalf("a bystander store heard %+v of a release that only B may take", an)
	}
	if _, err := stores[0].Acquire(ctx, b); err != nil {
		t.Fatalf("B's Acquire after the release: %v", err)
	}
	if n := c.Exists(ctx, leaseKey(holder.Prefix(), "k")+":qc").Val(); n != 0 {
		t.Errorf("the queue's channel hash outlived its last waiter")
	}
	if err := stores[0].Release(ctx, b); err != nil { // nobody waits: everyone hears it
		t.Fatal(err)
	}
	for i, sub := range subs {
		if an, err := next(sub, 10*time.Second); err != nil || an != (driver.Announcement{Key: "k"}) {
			t.Errorf("store %d heard %+v, %v of B's release; want k", i, an, err)
		}
	}
}
