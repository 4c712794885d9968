// The Client's release subscription when Subscribe fails: a failure of the
// store puts the Client's waiters on their timers for a while, a Subscribe
// that ended with its caller's ctx does not.

package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// gatedStore is a memlease handle whose Subscribe, while held is set, waits
// for its ctx to end (a subscription still being made when the waiter gives
// up) or fails at once when fail is set; it counts Acquire calls.
type gatedStore struct {
	*memlease.Store
	held     atomic.Bool
	fail     atomic.Bool
	entered  chan struct{} // gets a value when a held Subscribe starts waiting
	acquires atomic.Int64
}

var errSubscribeDown = errors.New("subscribe: store unavailable")

func (s *gatedStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	s.acquires.Add(1)
	return s.Store.Acquire(ctx, r)
}

func (s *gatedStore) Subscribe(ctx context.Context) (driver.Subscription, error) {
	if s.fail.Load() {
		return nil, errSubscribeDown
	}
	if s.held.Load() {
		s.entered <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Store.Subscribe(ctx)
}

// waitAcquires waits (in real time) until s has seen n Acquire calls.
func waitAcquires(t *testing.T, s *gatedStore, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.acquires.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d Acquire calls after 5s, want %d", s.acquires.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// acquireRelease acquires key with c in a goroutine, releases it at once
// and sends the outcome.
func acquireRelease(ctx context.Context, c *lease.Client, key string) <-chan error {
	got := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, key)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	return got
}

// TestSubscribeCancelledNoCooldown: a waiter that gives up while its
// Client's subscription is being made (its ctx ends Subscribe) does not
// keep the Client's next waiter from subscribing: that waiter is woken by
// the release, on a fake clock that never moves (no timer can wake it). A
// Subscribe that the store fails does put the next waiter on its timers for
// the cooldown.
func TestSubscribeCancelledNoCooldown(t *testing.T) {
	clk := leasetest.NewFakeClock()
	mem := memlease.New(memlease.WithClock(clk))
	defer func() { _ = mem.Close() }()
	s := &gatedStore{Store: mem.Handle(), entered: make(chan struct{}, 1)}
	c, err := lease.New(s, lease.WithClock(clk), lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	holder, err := lease.New(mem.Handle(), lease.WithClock(clk), lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	h, err := holder.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// The first waiter gives up during Subscribe.
	s.held.Store(true)
	wctx, wcancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := c.Acquire(wctx, "k")
		gaveUp <- err
	}()
	select {
	case <-s.entered:
	case <-ctx.Done():
		t.Fatal("the first waiter never subscribed")
	}
	wcancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first waiter's Acquire = %v, want context.Canceled", err)
	}

	// The next waiter subscribes and waits (two refused attempts: before
	// and after subscribing); the release wakes it.
	s.held.Store(false)
	n := s.acquires.Load()
	got := acquireRelease(ctx, c, "k")
	waitAcquires(t, s, n+2)
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the second waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second waiter was not woken by the release (its Client did not subscribe)")
	}

	// A store failure, by contrast, sends waiters to their timers: with
	// the clock stopped, the release does not wake the next waiter until
	// the clock passes its timer. A new Client, so that no subscription is
	// active.
	c2, err := lease.New(s, lease.WithClock(clk), lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c2.Close() }()
	if h, err = holder.TryAcquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	s.fail.Store(true)
	n = s.acquires.Load()
	got = acquireRelease(ctx, c2, "k")
	waitAcquires(t, s, n+2)
	s.fail.Store(false)
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("the waiter of a Client whose Subscribe failed returned (%v) before its timer", err)
	case <-time.After(200 * time.Millisecond):
	}
	clk.Advance(10 * time.Second)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter after its timer: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by its timer")
	}
}
