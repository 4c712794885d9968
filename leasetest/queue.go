// Queued: the check, shared by the conformance suite and the stores' own
// queue tests, that a queueing Acquire was refused with the waiters ahead.

package leasetest

import (
	"context"
	"errors"
	"testing"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Queued asks s to acquire r with Request.Queue and fails the test unless it
// is refused with a *lease.HeldError counting ahead live waiters queued
// before r.Token; it returns that error.
func Queued(t testing.TB, ctx context.Context, s driver.Store, r driver.Request, ahead int) *lease.HeldError {
	t.Helper()
	r.Queue = true
	_, err := s.Acquire(ctx, r)
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("queued Acquire(%q) for %s = %v, want a *lease.HeldError", r.Key, r.Holder, err)
	}
	if he.Queued != ahead {
		t.Fatalf("queued Acquire(%q) for %s: HeldError.Queued = %d, want %d waiters ahead", r.Key, r.Holder, he.Queued, ahead)
	}
	return he
}
