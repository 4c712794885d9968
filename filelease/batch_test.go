package filelease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestRenewMany: one call renews every held request, reports ErrNotHeld for
// a token that holds nothing, and ctx's error once ctx has ended.
func TestRenewMany(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	s := newStore(t, t.TempDir())
	a, b := req("a", "A", time.Second), req("b", "B", time.Second)
	mustAcquire(t, s, a)
	mustAcquire(t, s, b)
	stranger := req("a", "S", time.Second)
	time.Sleep(600 * time.Millisecond)
	errs := s.RenewMany(ctx, []lease.Request{a, stranger, b})
	if len(errs) != 3 || errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], lease.ErrNotHeld) {
		t.Fatalf("RenewMany = %v, want [nil ErrNotHeld nil]", errs)
	}
	time.Sleep(600 * time.Millisecond) // past the first TTL, within the renewed one
	for _, r := range []lease.Request{a, b} {
		if info, err := s.Inspect(ctx, r.Key); err != nil || !info.Held || info.Holder != r.Holder {
			t.Errorf("Inspect(%q) after the renewal = %+v, %v; want held by %s", r.Key, info, err, r.Holder)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for i, err := range s.RenewMany(done, []lease.Request{a, b}) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("RenewMany with an ended ctx [%d] = %v, want context.Canceled", i, err)
		}
	}
}
