// Bounded leases (WithMaxHold, WithManualRenew, Lease.Renew, Lease.Extend)
// and reentrancy (WithReentrant), on the fake clock.

package lease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

func TestMaxHoldGivesUp(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "job", lease.WithTTL(3*time.Second), lease.WithMaxHold(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Second)
	f.rec.take(t, lease.EventRenewed) // healthy: renewed every TTL/3
	f.clk.Advance(time.Second)
	f.rec.take(t, lease.EventRenewed)
	f.clk.Advance(3 * time.Second) // 5 s after the acquisition
	ev := f.rec.take(t, lease.EventLost)
	var lost *lease.LostError
	if ev.Reason != lease.LossMaxHold || !errors.As(l.Err(), &lost) || lost.Reason != lease.LossMaxHold {
		t.Fatalf("lost event reason %q, Err %v; want %q", ev.Reason, l.Err(), lease.LossMaxHold)
	}
	if !errors.Is(context.Cause(l.Context()), lease.ErrLost) {
		t.Errorf("Context cause %v, want ErrLost", context.Cause(l.Context()))
	}
	other := f.other(t)
	until(t, "the store freed the key given up", func() bool {
		l2, err := other.TryAcquire(ctx, "job")
		return err == nil && l2.Release(ctx) == nil
	})
	if _, err := f.c.TryAcquire(ctx, "x", lease.WithMaxHold(-time.Second)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("negative max hold: %v, want ErrInvalid", err)
	}
}

func TestManualRenew(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const ttl, drift = 9 * time.Second, time.Second
	l, err := f.c.TryAcquire(ctx, "fn", lease.WithTTL(ttl), lease.WithDriftMargin(drift), lease.WithManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(5 * time.Second) // past the renew interval: the heartbeat does not renew
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if kinds := f.rec.kinds(); len(kinds) != 2 || kinds[1] != "renewed" {
		t.Fatalf("events %v, want acquired then the one renewal Renew made", kinds)
	}
	if got := l.Remaining(); got != ttl-drift {
		t.Errorf("Remaining after Renew = %v, want %v", got, ttl-drift)
	}
	// A frozen process thawed: the clock is past the deadline.
	f.fault.BlockRenewals(true) // nothing may reach the store
	f.clk.Advance(ttl - drift)
	err = l.Renew(ctx)
	var lost *lease.LostError
	if !errors.As(err, &lost) || lost.Reason != lease.LossDeadline {
		t.Fatalf("Renew past the deadline = %v, want a LossDeadline *LostError", err)
	}
	if err := l.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew of a lost lease = %v, want ErrLost", err)
	}
}

func TestRenewNotHeld(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "k", lease.WithManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.mem.Handle().Release(ctx, driver.Request{Key: l.Key(), Token: l.Token()}); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); !errors.Is(err, lease.ErrLost) || !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Renew after the store dropped the token = %v, want ErrLost and ErrNotHeld", err)
	}
	f.fault.FailRenewals(errors.New("store down"))
	l2, err := f.c.TryAcquire(ctx, "k2", lease.WithManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Renew(ctx); err == nil || errors.Is(err, lease.ErrLost) || l2.Err() != nil {
		t.Fatalf("Renew with the store down = %v (Err %v), want the store's error and the lease still held", err, l2.Err())
	}
}

func TestExtend(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "k", lease.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 30*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if l.TTL() != 30*time.Second || l.Remaining() != 27*time.Second-time.Millisecond {
		t.Errorf("after Extend: TTL %v, Remaining %v; want 30s and 30s-(3s+1ms)", l.TTL(), l.Remaining())
	}
	info, err := f.c.Inspect(ctx, "k")
	if err != nil || info.Remaining != 30*time.Second {
		t.Errorf("Inspect after Extend = %+v, %v; want 30s remaining in the store", info, err)
	}
	f.rec.take(t, lease.EventRenewed)
	f.clk.Advance(9 * time.Second) // the old renew interval: nothing due
	f.clk.Advance(time.Second)     // the new one, TTL/3 = 10 s
	f.rec.take(t, lease.EventRenewed)
	if info, _ := f.c.Inspect(ctx, "k"); info.Remaining != 30*time.Second {
		t.Errorf("the heartbeat renewed with %v left in the store, want the new TTL", info.Remaining)
	}
	if err := l.Extend(ctx, time.Microsecond); !errors.Is(err, lease.ErrInvalid) || l.Err() != nil || l.TTL() != 30*time.Second {
		t.Errorf("Extend below the minimum TTL = %v (Err %v, TTL %v), want ErrInvalid and nothing changed", err, l.Err(), l.TTL())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, lease.ErrReleased) {
		t.Errorf("Extend after Release = %v, want ErrReleased", err)
	}
}

func TestReentrant(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "k", lease.WithReentrant(true))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			l2, err := f.c.Acquire(ctx, "k", lease.WithReentrant(true))
			if err != nil || l2 != l {
				t.Errorf("reentrant Acquire = %v, %v; want the held lease", l2, err)
			}
		})
	}
	wg.Wait()
	if _, err := f.c.TryAcquire(ctx, "k"); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("TryAcquire without WithReentrant = %v, want the Self HeldError", err)
	}
	for i := range 3 {
		if err := l.Release(ctx); err != nil || l.Err() != nil {
			t.Fatalf("Release %d of 4: %v (Err %v), want the lease still held", i+1, err, l.Err())
		}
	}
	if err := l.Release(ctx); err != nil || !errors.Is(l.Err(), lease.ErrReleased) {
		t.Fatalf("last Release: %v (Err %v), want the key released", err, l.Err())
	}
	if info, _ := f.c.Inspect(ctx, "k"); info.Held {
		t.Errorf("the key is still held after the last Release: %+v", info)
	}
	plain, err := f.c.TryAcquire(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.TryAcquire(ctx, "p", lease.WithReentrant(true)); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("reentrant TryAcquire of a key held without WithReentrant = %v, want ErrHeld", err)
	}
	_ = plain.Release(ctx)
}

// gated holds back the first store Acquire until release is closed,
// closing entered when it arrives.
type gated struct {
	*memlease.Store
	calls   atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func (g *gated) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if g.calls.Add(1) == 1 {
		close(g.entered)
		<-g.release
	}
	return g.Store.Acquire(ctx, r)
}

// TestReentrantAfterRefusal: an Acquire refused (and queued) because
// another goroutine of the Client won the key meanwhile re-enters that
// lease and leaves the queue: the key is free for others once both holds
// are released.
func TestReentrantAfterRefusal(t *testing.T) {
	st := memlease.New()
	defer st.Close()
	g := &gated{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	c, err := lease.New(g)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other, err := lease.New(st.Handle())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	first := make(chan *lease.Lease, 1)
	go func() {
		l, err := c.Acquire(ctx, "k", lease.WithReentrant(true))
		if err != nil {
			t.Error(err)
		}
		first <- l
	}()
	<-g.entered // its store call waits; another goroutine wins meanwhile
	won, err := c.TryAcquire(ctx, "k", lease.WithReentrant(true))
	if err != nil {
		t.Fatal(err)
	}
	close(g.release)
	if l := <-first; l != won {
		t.Fatalf("the refused Acquire returned %v, want the lease won meanwhile", l)
	}
	for range 2 {
		if err := won.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l, err := other.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("after both releases another client is refused: %v (a queue entry left behind)", err)
	}
	_ = l.Release(ctx)
}
