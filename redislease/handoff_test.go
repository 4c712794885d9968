// Hand-off: a release gives the key to the first waiter whose store listens,
// and that store grants it from the announcement with no request.

package redislease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/redislease"
)

// announcement reads sub's next announcement within 10 s.
func announcement(t *testing.T, ctx context.Context, sub lease.Subscription) lease.Announcement {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	a, err := sub.(lease.Announcer).NextAnnouncement(ctx)
	if err != nil {
		t.Fatalf("NextAnnouncement: %v", err)
	}
	return a
}

// heldBy checks that Inspect shows key held by holder, and returns its fence.
func heldBy(t *testing.T, ctx context.Context, s lease.Store, key, holder string) uint64 {
	t.Helper()
	info, err := s.Inspect(ctx, key)
	if err != nil || !info.Held || info.Holder != holder {
		t.Fatalf("Inspect(%q) = %+v, %v; want held by %s", key, info, err, holder)
	}
	return info.Fence
}

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

// releaseTo acquires a through sA, queues the waiters through sB in that
// order, and releases a.
func releaseTo(t *testing.T, ctx context.Context, sA, sB lease.Store, a lease.Request, waiters ...lease.Request) {
	t.Helper()
	if _, err := sA.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	for i, w := range waiters {
		queued(t, ctx, sB, w, i)
	}
	if err := sA.Release(ctx, a); err != nil {
		t.Fatalf("%s's Release: %v", a.Holder, err)
	}
}

// TestHandOff: A's release hands the key to B, queued through a store that
// listens: the key carries B's holder and a larger fence at once, B's store
// grants B's Acquire with no request (Since counts from B's last queueing
// request), and B renews and releases it as its own.
func TestHandOff(t *testing.T) {
	sA, sB, hook := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	sub := subscribe(t, sB)
	subA := subscribe(t, sA) // another client of the namespace
	ttl := 10 * time.Second
	a, b := req("k", token(t), "A", ttl), req("k", token(t), "B", ttl)
	ga, err := sA.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	queued(t, ctx, sB, b, 0)
	queuedAt := time.Now()
	if err := sA.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	fence := heldBy(t, ctx, sA, "k", "B")
	if fence <= ga.Fence {
		t.Fatalf("handed fence %d, not above A's %d", fence, ga.Fence)
	}
	if an := announcement(t, ctx, sub); an.Key != "k" || an.Next != b.Token {
		t.Fatalf("announcement %+v, want key k with B next", an)
	}
	// The hand-off was published to B's store alone: A's subscription hears
	// the next release on the namespace's channel first.
	m := req("marker", token(t), "M", ttl)
	if _, err := sA.Acquire(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := sA.Release(ctx, m); err != nil {
		t.Fatal(err)
	}
	if an := announcement(t, ctx, subA); an.Key != "marker" {
		t.Fatalf("A's subscription heard %+v first, want the marker's release", an)
	}
	hook.reset()
	b.Queue = true
	g, err := sB.Acquire(ctx, b)
	if err != nil || g.Fence != fence {
		t.Fatalf("B's Acquire = %+v, %v; want fence %d", g, err, fence)
	}
	if n := len(hook.singles) + len(hook.pipelines); n != 0 {
		t.Errorf("B's Acquire sent %v %v, want no request", hook.singles, hook.pipelines)
	}
	if g.Since <= 0 || g.Since > time.Since(queuedAt)+time.Second {
		t.Errorf("Since = %v, want the time since B's queueing request (about %v)", g.Since, time.Since(queuedAt))
	}
	if err := sB.Renew(ctx, b); err != nil {
		t.Fatalf("B's Renew: %v", err)
	}
	if f := heldBy(t, ctx, sA, "k", "B"); f != fence {
		t.Errorf("fence after B's renewal %d, want %d", f, fence)
	}
	// The releaser cannot release what it handed over.
	if err := sA.Release(ctx, a); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("A's second Release = %v, want ErrNotHeld", err)
	}
	if err := sB.Release(ctx, b); err != nil {
		t.Fatalf("B's Release: %v", err)
	}
	if info, err := sA.Inspect(ctx, "k"); err != nil || info.Held {
		t.Fatalf("after B's Release Inspect = %+v, %v; want free", info, err)
	}
}

// TestHandOffUnread: a waiter whose store has not read the announcement
// yet (or missed it) asks the server, which grants it the fence it was
// handed; a second Acquire keeps it.
func TestHandOffUnread(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	subscribe(t, sB)
	ttl := 10 * time.Second
	a, b := req("k", token(t), "A", ttl), req("k", token(t), "B", ttl)
	releaseTo(t, ctx, sA, sB, a, b)
	fence := heldBy(t, ctx, sA, "k", "B")
	b.Queue = true
	for i := 0; i < 2; i++ {
		if g, err := sB.Acquire(ctx, b); err != nil || g.Fence != fence {
			t.Fatalf("B's Acquire #%d = %+v, %v; want fence %d", i+1, g, err, fence)
		}
	}
}

// TestHandOffNotListening: a waiter whose store has no subscription is not
// handed the key (it would not hear of it): the release frees the key,
// reserved for that waiter, as for every store (leasetest's FIFO tests).
func TestHandOffNotListening(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	subscribe(t, sA) // the releaser listening does not matter
	ttl := 10 * time.Second
	a, b := req("k", token(t), "A", ttl), req("k", token(t), "B", ttl)
	releaseTo(t, ctx, sA, sB, a, b)
	if info, err := sA.Inspect(ctx, "k"); err != nil || info.Held {
		t.Fatalf("Inspect = %+v, %v; want free (reserved for B)", info, err)
	}
	b.Queue = true
	if _, err := sB.Acquire(ctx, b); err != nil {
		t.Fatalf("B's Acquire: %v", err)
	}
}

// TestHandOffGiveUp: a waiter handed the key that gives up releases it, and
// the key is handed on to the next listening waiter.
func TestHandOffGiveUp(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	subB := subscribe(t, sB)
	ttl := 10 * time.Second
	a, b, c := req("k", token(t), "A", ttl), req("k", token(t), "B", ttl), req("k", token(t), "C", ttl)
	releaseTo(t, ctx, sA, sB, a, b, c)
	fb := heldBy(t, ctx, sA, "k", "B")
	if an := announcement(t, ctx, subB); an.Next != b.Token {
		t.Fatalf("announcement %+v, want B next", an)
	}
	if err := sB.Release(ctx, b); err != nil {
		t.Fatalf("B's Release of the key handed to it: %v", err)
	}
	if fc := heldBy(t, ctx, sA, "k", "C"); fc <= fb {
		t.Fatalf("C's fence %d, not above B's %d", fc, fb)
	}
	if an := announcement(t, ctx, subB); an.Next != c.Token {
		t.Fatalf("announcement %+v, want C next", an)
	}
	// B's note is gone: a new Acquire with B's token is refused.
	b.Queue = true
	if _, err := sB.Acquire(ctx, b); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("B's Acquire after giving up = %v, want ErrHeld", err)
	}
	c.Queue = true
	if _, err := sB.Acquire(ctx, c); err != nil {
		t.Fatalf("C's Acquire: %v", err)
	}
}

// TestHandOffToDeadWaiter: a key handed to a waiter that died expires its
// TTL after the hand-off, like a dead holder's.
func TestHandOffToDeadWaiter(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	subscribe(t, sB)
	a, b := req("k", token(t), "A", 10*time.Second), req("k", token(t), "B", 500*time.Millisecond)
	releaseTo(t, ctx, sA, sB, a, b)
	heldBy(t, ctx, sA, "k", "B")
	leasetest.AwaitFree(t, ctx, sA, "k", 5*time.Second, 50*time.Millisecond)
	if _, err := sA.Acquire(ctx, req("k", token(t), "D", time.Second)); err != nil {
		t.Fatalf("Acquire after the dead waiter's TTL: %v", err)
	}
}

// TestHandOffFenceCounterAboveClock: a hand-off's fence follows the counter
// when it is ahead of the server clock, as an acquisition's does.
func TestHandOffFenceCounterAboveClock(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	_ = subscribe(t, sB)
	ttl := 10 * time.Second
	a, b := req("k", token(t), "A", ttl), req("k", token(t), "B", ttl)
	if _, err := sA.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	queued(t, ctx, sB, b, 0)
	c := sharedClient(t)
	const high = 9000000000000000
	if err := c.Set(ctx, fenceKey(sA.Prefix(), "k"), high, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := sA.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if f := heldBy(t, ctx, sA, "k", "B"); f != high+1 {
		t.Errorf("handed fence %d, want counter+1 = %d", f, uint64(high+1))
	}
}
