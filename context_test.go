// A lease's context, made on first use: before or after the lease ends, it
// ends with the lease, with Err as its cause.

package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

func TestLeaseContextBeforeAndAfterTheEnd(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ended := func(t *testing.T, lctx context.Context, want error) {
		t.Helper()
		select {
		case <-lctx.Done():
		default:
			t.Fatalf("the lease's context is not done")
		}
		if c := context.Cause(lctx); !errors.Is(c, want) {
			t.Fatalf("context cause %v, want one matching %v", c, want)
		}
	}

	// Made while held: ends at Release; the same context every time.
	l1, err := f.c.TryAcquire(ctx, "early")
	if err != nil {
		t.Fatal(err)
	}
	early := l1.Context()
	if early.Err() != nil || l1.Context() != early || l1.Done() != early.Done() {
		t.Fatalf("a held lease's context: %v, or a new one each call", early.Err())
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ended(t, early, lease.ErrReleased)

	// First asked for after Release: born done.
	l2, err := f.c.TryAcquire(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ended(t, l2.Context(), lease.ErrReleased)
	<-l2.Done()

	// First asked for after a loss: born done, with the loss as cause.
	l3, err := f.c.TryAcquire(ctx, "lost", lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f.dropToken(t, l3, 10*time.Second)
	ended(t, l3.Context(), lease.ErrLost)
	var le *lease.LostError
	if !errors.As(context.Cause(l3.Context()), &le) || le.Reason != lease.LossNotHeld {
		t.Fatalf("cause %v, want a *LostError with reason %q", context.Cause(l3.Context()), lease.LossNotHeld)
	}
}
