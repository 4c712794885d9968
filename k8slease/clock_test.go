// A store whose wall clock was stepped ahead: the clock fault of Kubernetes,
// where each store's own clock decides expiry.

package k8slease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/k8slease"
)

// TestK8sClockAhead: on Kubernetes the clock that decides expiry is each
// store's own (the apiserver expires nothing), so a clock fault is a store
// whose host's wall clock was stepped ahead by more than a TTL. By the
// wall-clock rule (renewTime + TTL + skew) it judges a live hold expired
// and takes the key from a holder that is still renewing: an early grant,
// as a server clock step gives on Redis. Its fence is above the holder's,
// so a fenced resource refuses the holder from then on, and the holder's
// next Renew fails. A store that judges by observation alone
// (WithMaxClockSkew(-1)) is not fooled: it counts on the monotonic clock,
// which a step leaves alone.
func TestK8sClockAhead(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cs := client(t)
	prefix := freshPrefix(t)
	ttl := 3 * time.Second
	ahead := aheadClock(ttl * 3 / 2)
	holder := newStore(t, cs, prefix)
	observer := newStore(t, cs, prefix, k8slease.WithClock(ahead), k8slease.WithMaxClockSkew(-1))
	stepped := newStore(t, cs, prefix, k8slease.WithClock(ahead))
	r := req("k", "holder", ttl)
	g, err := holder.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	var he *lease.HeldError
	if _, err := observer.Acquire(ctx, req("k", "observer", ttl)); !errors.As(err, &he) {
		t.Errorf("a store judging by observation, its wall clock %v ahead: Acquire = %v, want held", time.Duration(ahead), err)
	}
	early, err := stepped.Acquire(ctx, req("k", "stepped", ttl))
	if err != nil || early.Fence <= g.Fence {
		t.Fatalf("a store with its wall clock %v ahead: Acquire = %+v, %v; want an early grant above fence %d",
			time.Duration(ahead), early, err, g.Fence)
	}
	if err := holder.Renew(ctx, r); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("the first holder's Renew after the early grant: %v, want ErrNotHeld", err)
	}
}

// aheadClock is the system clock plus a constant offset: its readings keep
// their monotonic part, shifted alike, so durations between them are real.
type aheadClock time.Duration

func (c aheadClock) Now() time.Time { return time.Now().Add(time.Duration(c)) }

func (c aheadClock) NewTimer(d time.Duration) lease.Timer { return lease.SystemClock().NewTimer(d) }
