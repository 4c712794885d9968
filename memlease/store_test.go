package memlease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// What the conformance suite cannot say: timing by a fake clock, exactly;
// handles; Plain; a subscription's overflow.

const tokA, tokB, tokC = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccccccccccccccc"

var ctx = context.Background()

func req(key, token string, ttl time.Duration, queue bool) driver.Request {
	return driver.Request{Key: key, Token: token, Holder: "h" + token[:1], TTL: ttl, Queue: queue}
}

func mustAcquire(t *testing.T, s driver.Store, r driver.Request, fence uint64) {
	t.Helper()
	if g, err := s.Acquire(ctx, r); err != nil || g.Fence != fence {
		t.Fatalf("Acquire(%s by %s) = %+v, %v; want fence %d", r.Key, r.Holder, g, err, fence)
	}
}

// next calls sub.Next with a one-second timeout.
func next(sub driver.Subscription) (driver.Announcement, error) {
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return sub.Next(c)
}

func TestExpiryFollowsTheClock(t *testing.T) {
	clk := leasetest.NewFakeClock()
	s := memlease.New(memlease.WithClock(clk))
	mustAcquire(t, s, req("k", tokA, time.Second, false), 1)
	mustAcquire(t, s, req("j", tokB, time.Second, false), 1)
	clk.Advance(999 * time.Millisecond)
	_, err := s.Acquire(ctx, req("k", tokB, time.Second, false))
	var he *lease.HeldError
	if want := (lease.HeldError{Key: "k", Holder: "ha", Fence: 1, Remaining: time.Millisecond}); !errors.As(err, &he) || *he != want {
		t.Errorf("Acquire of a held key: %v, want %+v", err, want)
	}
	errs := s.RenewMany(ctx, []driver.Request{req("k", tokA, time.Second, false), req("j", tokA, time.Second, false)})
	if errs[0] != nil || !errors.Is(errs[1], lease.ErrNotHeld) {
		t.Errorf("RenewMany(own, foreign) = %v, want [nil ErrNotHeld]", errs)
	}
	clk.Advance(time.Millisecond) // j's TTL is up exactly, k was renewed
	if info, err := s.Inspect(ctx, "k"); err != nil || info != (driver.Info{Key: "k", Held: true, Holder: "ha", Fence: 1, Remaining: 999 * time.Millisecond}) {
		t.Errorf("Inspect(k) after RenewMany = %+v, %v", info, err)
	}
	if info, err := s.Inspect(ctx, "j"); err != nil || info.Held {
		t.Errorf("Inspect(j) at its expiry = %+v, %v; want free", info, err)
	}
	if err := s.Renew(ctx, req("j", tokB, time.Second, false)); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew after expiry: %v, want ErrNotHeld", err)
	}
	mustAcquire(t, s, req("j", tokA, time.Second, false), 2)
}

// TestQueueFollowsTheClock: waiters' entries expire by the clock, the cap is
// exact, and announcements name the live head of the queue.
func TestQueueFollowsTheClock(t *testing.T) {
	clk := leasetest.NewFakeClock()
	s := memlease.New(memlease.WithClock(clk), memlease.WithMaxWaiters(2))
	if c := s.Caps(); !c.FIFO || c.MaxWaiters != 2 {
		t.Errorf("Caps() = %+v, want FIFO with 2 waiters", c)
	}
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	mustAcquire(t, s, req("k", tokA, time.Minute, false), 1)
	var he *lease.HeldError
	for i, r := range []driver.Request{req("k", tokB, time.Second, true), req("k", tokC, time.Minute, true)} {
		if _, err := s.Acquire(ctx, r); !errors.As(err, &he) || he.Queued != i {
			t.Fatalf("queued Acquire by %s: %v, want a HeldError with %d ahead", r.Holder, err, i)
		}
	}
	if _, err := s.Acquire(ctx, req("k", "dddddddddddddddddddddddddddddddd", time.Minute, true)); !errors.Is(err, lease.ErrQueueFull) {
		t.Errorf("a third waiter: %v, want ErrQueueFull", err)
	}
	clk.Advance(time.Second) // b's entry expires: c is the head
	if err := s.Release(ctx, req("k", tokA, 0, false)); err != nil {
		t.Fatal(err)
	}
	if a, err := next(sub); err != nil || a != (driver.Announcement{Key: "k", Next: tokC}) {
		t.Errorf("announcement = %+v, %v; want k, next c", a, err)
	}
	if _, err := s.Acquire(ctx, req("k", tokB, time.Minute, true)); !errors.As(err, &he) || he.Queued != 1 || he.Holder != "" {
		t.Errorf("b behind c on a free key: %v, want a HeldError with 1 ahead and no holder", err)
	}
	// b now heads the queue; when it gives up, the key is announced again.
	if err := s.Release(ctx, req("k", tokC, 0, false)); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Release by the waiter c: %v, want ErrNotHeld", err)
	}
	if a, err := next(sub); err != nil || a != (driver.Announcement{Key: "k", Next: tokB}) {
		t.Errorf("announcement after the head left = %+v, %v; want k, next b", a, err)
	}
	mustAcquire(t, s, req("k", tokB, time.Minute, false), 2)
}

func TestClosedHandle(t *testing.T) {
	s := memlease.New()
	other := s.Handle()
	mustAcquire(t, s, req("k", tokA, time.Minute, false), 1)
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error)
	go func() { _, err := sub.Next(ctx); errc <- err }()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, memlease.ErrClosed) {
		t.Errorf("Next blocked when the handle closed: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, errAcquire := s.Acquire(ctx, req("k", tokA, time.Minute, false))
	_, errInspect := s.Inspect(ctx, "k")
	_, errSubscribe := s.Subscribe(ctx)
	for _, err := range []error{errAcquire, errInspect, errSubscribe, s.Renew(ctx, req("k", tokA, time.Minute, false)), s.Release(ctx, req("k", tokA, 0, false))} {
		if !errors.Is(err, memlease.ErrClosed) {
			t.Errorf("an operation on a closed handle: %v, want ErrClosed", err)
		}
	}
	if info, err := other.Inspect(ctx, "k"); err != nil || !info.Held || info.Holder != "ha" {
		t.Errorf("Inspect through another handle = %+v, %v; want held by ha", info, err)
	}
	if err := other.Release(ctx, req("k", tokA, 0, false)); err != nil {
		t.Errorf("Release through another handle: %v", err)
	}
	mustAcquire(t, s.Handle(), req("k", tokB, time.Minute, false), 2)
}

func TestSubscriptionOverflow(t *testing.T) {
	s := memlease.New()
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for i := range memlease.MaxPending + 1 {
		r := req(fmt.Sprint(i), tokA, time.Minute, false)
		mustAcquire(t, s, r, 1)
		if err := s.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range memlease.MaxPending {
		if a, err := next(sub); err != nil || a.Key != fmt.Sprint(i) {
			t.Fatalf("announcement %d = %+v, %v", i, a, err)
		}
	}
	for range 2 {
		if _, err := next(sub); !errors.Is(err, memlease.ErrOverflow) {
			t.Errorf("Next after the overflow: %v, want ErrOverflow", err)
		}
	}
}

func TestPlainHidesOptionalInterfaces(t *testing.T) {
	s := memlease.New()
	p := memlease.Plain(s)
	_, batch := p.(driver.BatchRenewer)
	_, notifier := p.(driver.Notifier)
	if batch || notifier || p.Caps().FIFO {
		t.Errorf("Plain store: BatchRenewer %v, Notifier %v, FIFO %v; want none", batch, notifier, p.Caps().FIFO)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Inspect(ctx, "k"); !errors.Is(err, memlease.ErrClosed) {
		t.Errorf("closing the Plain store did not close s: %v", err)
	}
}
