package lease_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

// noShared is a store that keeps no shared holds.
type noShared struct{ *memlease.Store }

func (s noShared) Caps() driver.Caps {
	c := s.Store.Caps()
	c.Shared = false
	return c
}

// TestSharedUnsupported: a store without Caps.Shared refuses shared
// acquisitions before they reach it, with errors.ErrUnsupported.
func TestSharedUnsupported(t *testing.T) {
	c, err := lease.New(noShared{memlease.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.TryAcquireShared(context.Background(), "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("TryAcquireShared = %v, want errors.ErrUnsupported", err)
	}
	if _, err := c.AcquireShared(context.Background(), "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("AcquireShared = %v, want errors.ErrUnsupported", err)
	}
}

// TestSharedEventsAndReentry: events say a lease is shared; readers ignore
// WithReentrant (each is its own holder) and a reader of a key the Client
// writes is refused as its own.
func TestSharedEventsAndReentry(t *testing.T) {
	ctx := context.Background()
	var shared []bool
	c, err := lease.New(memlease.New(), lease.WithObserver(lease.ObserverFunc(func(e lease.Event) {
		if e.Kind == lease.EventAcquired {
			shared = append(shared, e.Shared)
		}
	})), lease.WithReentrant(true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r1, err := c.TryAcquireShared(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.TryAcquireShared(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if r1 == r2 || r1.Token() == r2.Token() || !r2.Shared() {
		t.Errorf("two readers of one Client share a lease or token (reentry applied to readers)")
	}
	if _, err := c.TryAcquire(ctx, "k"); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("a writer while the Client's readers hold = %v, want ErrHeld", err)
	}
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	var held *lease.HeldError
	if _, err := c.TryAcquireShared(ctx, "k"); !errors.As(err, &held) || !held.Self {
		t.Errorf("a reader of a key the Client writes = %v, want a HeldError with Self", err)
	}
	_ = w.Release(ctx)
	if len(shared) != 3 || !shared[0] || !shared[1] || shared[2] {
		t.Errorf("EventAcquired Shared = %v, want [true true false]", shared)
	}
}
