// Hand-off: a release gives the key to the first waiter whose store listens,
// and that store grants it from the announcement with no request (the
// shared suite, handofftest), published on that store's own channel alone.

package redislease_test

import (
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/handoff/handofftest"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/redislease"
)

// handOffPair returns a store and a second store of the same namespace on
// its own client, which counts its requests.
func handOffPair(t *testing.T) (*redislease.Store, *redislease.Store, *countHook) {
	c := sharedClient(t)
	sA := newStore(t, c)
	cB := newClient(t, c.Options().Addr)
	hook := &countHook{}
	cB.AddHook(hook)
	return sA, storeWithPrefix(t, cB, sA.Prefix()), hook
}

// TestHandOff runs the shared hand-off suite.
func TestHandOff(t *testing.T) {
	handofftest.Run(t, handofftest.Harness{
		Pair: func(t *testing.T) (lease.Store, lease.Store, func() int) {
			sA, sB, hook := handOffPair(t)
			return sA, sB, func() int {
				hook.mu.Lock()
				defer hook.mu.Unlock()
				return len(hook.singles) + len(hook.pipelines)
			}
		},
	})
}

// TestHandOffOwnChannel: a hand-off is published to the waiter's store
// alone: another client's subscription of the namespace hears the next
// release on the namespace's channel first.
func TestHandOffOwnChannel(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	sub := handofftest.Subscribe(t, sB)
	subA := handofftest.Subscribe(t, sA)
	ttl := 10 * time.Second
	a, b := req("k", token(t), "A", ttl), req("k", token(t), "B", ttl)
	handofftest.ReleaseTo(t, ctx, sA, sB, a, b)
	if an := handofftest.Announcement(t, ctx, sub); an.Key != "k" || an.Next != b.Token {
		t.Fatalf("B's store heard %+v, want key k with B next", an)
	}
	m := req("marker", token(t), "M", ttl)
	if _, err := sA.Acquire(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := sA.Release(ctx, m); err != nil {
		t.Fatal(err)
	}
	if an := handofftest.Announcement(t, ctx, subA); an.Key != "marker" {
		t.Fatalf("A's subscription heard %+v first, want the marker's release", an)
	}
}

// TestHandOffFenceCounterAboveClock: a hand-off's fence follows the counter
// when it is ahead of the server clock, as an acquisition's does.
func TestHandOffFenceCounterAboveClock(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	handofftest.Subscribe(t, sB)
	ttl := 10 * time.Second
	a, b := req("k", token(t), "A", ttl), req("k", token(t), "B", ttl)
	if _, err := sA.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	leasetest.Queued(t, ctx, sB, b, 0)
	c := sharedClient(t)
	const high = 9000000000000000
	if err := c.Set(ctx, fenceKey(sA.Prefix(), "k"), high, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := sA.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if f := handofftest.HeldBy(t, ctx, sA, "k", "B"); f != high+1 {
		t.Errorf("handed fence %d, want counter+1 = %d", f, uint64(high+1))
	}
}
