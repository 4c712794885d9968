// Tests of the hand-off on release: the key goes to the first waiter in the
// releaser's transaction, with the fence plus one, and the waiter's store
// grants it without a round trip.

package etcdlease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/etcdlease"
	"github.com/leasekit/lease/leasetest"
)

// announced waits for sub's next announcement and fails unless it is key
// with successor next.
func announced(t *testing.T, sub lease.Subscription, key, next string) {
	t.Helper()
	ctx := testCtx(t, 5*time.Second)
	a, err := sub.(lease.Announcer).NextAnnouncement(ctx)
	if err != nil || a.Key != key || a.Next != next {
		t.Fatalf("NextAnnouncement = %+v, %v; want %q with next %.8s", a, err, key, next)
	}
}

func TestHandOff(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	prefix := testPrefix()
	cliA := newCli(t, endpoints(t))
	cliB, cnt := countingCli(t)
	sA, sB := newStore(t, cliA, prefix), newStore(t, cliB, prefix)
	ttl := 5 * time.Second
	a, b := req("k", ttl), req("k", ttl)
	b.Holder = "waiter-b"
	ga, err := sA.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	subA, err := sA.Subscribe(ctx) // the releaser's view of the queue
	if err != nil {
		t.Fatal(err)
	}
	defer subA.Close()
	subB, err := sB.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	leasetest.Queued(t, ctx, sB, b, 0)
	drain(t, subA) // its mirror learns B's entry from the watch
	entry, err := cliA.Get(ctx, entryKey(prefix, "k", b.Token))
	if err != nil || len(entry.Kvs) != 1 {
		t.Fatalf("B's entry: %v, %v", entry, err)
	}
	entryLease := clientv3.LeaseID(entry.Kvs[0].Lease)

	if err := sA.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	info, err := sA.Inspect(ctx, "k")
	if err != nil || !info.Held || info.Holder != b.Holder || info.Fence != ga.Fence+1 {
		t.Fatalf("after the hand-off Inspect = %+v, %v; want held by %q with fence %d", info, err, b.Holder, ga.Fence+1)
	}
	if id, _ := leaseOf(t, ctx, cliA, prefix, "k"); id != entryLease {
		t.Fatalf("the handed key is on etcd lease %x, want B's entry's %x", id, entryLease)
	}
	if resp, err := cliA.Get(ctx, entryKey(prefix, "k", b.Token)); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("B's entry after the hand-off: %v, %v; want it gone", resp, err)
	}
	announced(t, subB, "k", b.Token)

	cnt.take()
	b.Queue, b.RecordLater = true, true
	gb, err := sB.Acquire(ctx, b)
	if err != nil {
		t.Fatalf("B's Acquire after the hand-off: %v", err)
	}
	if calls := cnt.take(); len(calls) != 0 {
		t.Errorf("B's Acquire after the hand-off made calls %v, want none", calls)
	}
	if gb.Fence != ga.Fence+1 || gb.Since < 0 || gb.Since >= ttl/2 {
		t.Fatalf("B's grant = %+v, want fence %d and 0 <= Since < %v", gb, ga.Fence+1, ttl/2)
	}
	// The first renewal moves the key to B's store's own etcd lease, with
	// its fence.
	if err := sB.Renew(ctx, b); err != nil {
		t.Fatalf("B's first Renew: %v", err)
	}
	if id, granted := leaseOf(t, ctx, cliA, prefix, "k"); id == entryLease || granted != 5 {
		t.Fatalf("after B's renewal the key is on etcd lease %x (TTL %d s), want another than %x, of 5 s", id, granted, entryLease)
	}
	if info, err := sA.Inspect(ctx, "k"); err != nil || info.Fence != gb.Fence {
		t.Fatalf("after B's renewal Inspect = %+v, %v; want fence %d", info, err, gb.Fence)
	}
	if err := sB.Renew(ctx, b); err != nil {
		t.Fatalf("B's second Renew: %v", err)
	}

	// The entry's etcd lease carries nothing now: B's store queues its next
	// waiter on it (a spare), then that waiter gives up.
	e := req("k", ttl)
	leasetest.Queued(t, ctx, sB, e, 0)
	if resp, err := cliA.Get(ctx, entryKey(prefix, "k", e.Token)); err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != entryLease {
		t.Fatalf("E's entry: %v, %v; want it on the spare etcd lease %x", resp, err, entryLease)
	}
	drain(t, subB) // its mirror lists E
	// Nobody is queued then (B's mirror, not read since, still lists E: the
	// hand-off's condition fails): B's release frees the key.
	staleRelease(t, ctx, sB, e, sB, b)
}

// staleRelease: waiter w gives up through sw, then holder h releases
// through sh, whose mirror of the queue (not read since) still lists w:
// the hand-off's condition fails and the key is freed.
func staleRelease(t *testing.T, ctx context.Context, sw lease.Store, w lease.Request, sh lease.Store, h lease.Request) {
	t.Helper()
	if err := sw.Release(ctx, w); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("the waiter gives up: %v, want ErrNotHeld", err)
	}
	if err := sh.Release(ctx, h); err != nil {
		t.Fatalf("the holder's Release with a stale head: %v", err)
	}
	wantFree(t, ctx, sh, h.Key, "a release with a stale head")
}

// TestHandOffFences: fences grow strictly over hand-offs, acquisitions of a
// free key, a stale view of the queue, and an acquisition through a store
// that did not see the hand-off.
func TestHandOffFences(t *testing.T) {
	ctx, prefix, cli := fixture(t)
	sA, sB := newStore(t, cli, prefix), newStore(t, cli, prefix)
	ttl := 5 * time.Second
	var last uint64
	grow := func(what string, f uint64) {
		t.Helper()
		if f <= last {
			t.Fatalf("%s: fence %d, not above the previous %d", what, f, last)
		}
		last = f
	}
	a := req("k", ttl)
	g, err := sA.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	grow("A", g.Fence)

	// B, queued, gives up before A releases; A's mirror, not read since,
	// still lists B: the hand-off's condition fails and the key is freed.
	subA, err := sA.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer subA.Close()
	b := req("k", ttl)
	leasetest.Queued(t, ctx, sB, b, 0)
	drain(t, subA)
	staleRelease(t, ctx, sB, b, sA, a)

	// C takes the free key; D queues; C hands over to D (C's store sees D
	// through its subscription, which Next brings up to date).
	c, d := req("k", ttl), req("k", ttl)
	if g, err = sA.Acquire(ctx, c); err != nil {
		t.Fatal(err)
	}
	grow("C", g.Fence)
	leasetest.Queued(t, ctx, sB, d, 0)
	drain(t, subA)
	if err := sA.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	// D acquires through a third store that did not see the hand-off.
	sD := newStore(t, cli, prefix)
	d.Queue = true
	if g, err = sD.Acquire(ctx, d); err != nil {
		t.Fatalf("D's Acquire through another store: %v", err)
	}
	grow("D", g.Fence)
	if info, err := sA.Inspect(ctx, "k"); err != nil || info.Fence != g.Fence {
		t.Fatalf("Inspect = %+v, %v; want D's fence %d", info, err, g.Fence)
	}
	// Again through the same store: the same fence (idempotent).
	if g2, err := sD.Acquire(ctx, d); err != nil || g2.Fence != g.Fence {
		t.Fatalf("D's second Acquire = %+v, %v; want fence %d", g2, err, g.Fence)
	}
	if err := sD.Release(ctx, d); err != nil {
		t.Fatal(err)
	}
	e := req("k", ttl)
	if g, err = sB.Acquire(ctx, e); err != nil {
		t.Fatal(err)
	}
	grow("E (a free key again)", g.Fence)
}

// drain reads sub's pending announcements (bringing its mirror of the
// queues up to date) until it is quiet for 300ms.
func drain(t *testing.T, sub lease.Subscription) {
	t.Helper()
	for {
		ctx := testCtx(t, 300*time.Millisecond)
		if _, err := sub.Next(ctx); err != nil {
			return
		}
	}
}

// handTo makes sA's holder hand key "k" to b, queued through sB (whose
// subscription and sA's are open), and returns the fence b was handed.
func handTo(t *testing.T, ctx context.Context, sA, sB *etcdlease.Store, a, b lease.Request) uint64 {
	t.Helper()
	ga, err := sA.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	subA, err := sA.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = subA.Close() })
	subB, err := sB.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = subB.Close() })
	leasetest.Queued(t, ctx, sB, b, 0)
	drain(t, subA) // its mirror lists B
	if err := sA.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	announced(t, subB, "k", b.Token)
	return ga.Fence + 1
}

// TestHandOffGiveUp: a waiter that gives up after the key was handed to it
// (the Client's Release of its token) releases the key, and the next waiter
// acquires it with a larger fence.
func TestHandOffGiveUp(t *testing.T) {
	ctx, prefix, cli := fixture(t)
	sA, sB, sC := newStore(t, cli, prefix), newStore(t, cli, prefix), newStore(t, cli, prefix)
	ttl := 5 * time.Second
	a, b, c := req("k", ttl), req("k", ttl), req("k", ttl)
	handed := handTo(t, ctx, sA, sB, a, b)
	leasetest.Queued(t, ctx, sC, c, 0)
	if err := sB.Release(ctx, b); err != nil {
		t.Fatalf("B gives up holding the handed key: %v, want it released", err)
	}
	c.Queue = true
	g, err := sC.Acquire(ctx, c)
	if err != nil {
		t.Fatalf("C's Acquire after B gave up: %v", err)
	}
	if g.Fence <= handed {
		t.Fatalf("C's fence %d, not above B's %d", g.Fence, handed)
	}
}

// TestHandOffClose: closing the store a key was handed to, before its first
// renewal moved the key, frees the key (its entry's etcd lease is revoked).
func TestHandOffClose(t *testing.T) {
	ctx, prefix, cli := fixture(t)
	sA := newStore(t, cli, prefix)
	sB, err := etcdlease.New(cli, etcdlease.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ttl := 5 * time.Second
	a, b := req("k", ttl), req("k", ttl)
	handTo(t, ctx, sA, sB, a, b)
	b.Queue = true
	if _, err := sB.Acquire(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := sB.Close(); err != nil {
		t.Fatal(err)
	}
	wantFree(t, ctx, sA, "k", "B's store closed")
}

// TestHandOffToDeadWaiter: a key handed to a waiter that never comes for it
// (its process died; its entry's etcd lease is not kept alive) expires with
// that lease, a TTL after the waiter's last attempt.
func TestHandOffToDeadWaiter(t *testing.T) {
	ctx, prefix, cli := fixture(t)
	sA, sB := newStore(t, cli, prefix), newStore(t, cli, prefix)
	ttl := etcdlease.MinTTL
	a, b := req("k", ttl), req("k", ttl)
	start := time.Now()
	handTo(t, ctx, sA, sB, a, b)
	leasetest.AwaitFree(t, ctx, sA, "k", 4*ttl-time.Since(start), 100*time.Millisecond)
	if d := time.Since(start); d < ttl-100*time.Millisecond {
		t.Fatalf("the handed key expired %v after the waiter's last attempt, before its TTL %v", d, ttl)
	}
	t.Logf("the key handed to a dead waiter expired %v after its last attempt", time.Since(start).Round(time.Millisecond))
}

// fixture returns a test's context, key prefix and etcd client.
func fixture(t *testing.T) (context.Context, string, *clientv3.Client) {
	return testCtx(t, time.Minute), testPrefix(), newCli(t, endpoints(t))
}

// wantFree fails unless s reports key free (after says when).
func wantFree(t *testing.T, ctx context.Context, s lease.Store, key, after string) {
	t.Helper()
	if info, err := s.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("after %s Inspect = %+v, %v; want free", after, info, err)
	}
}

// TestHandOffNeedsHolder: a waiter the releaser's subscription knows only
// from its first read (keys only, so without the waiter's holder) is not
// handed the key: the release frees it, and the waiter takes it itself.
func TestHandOffNeedsHolder(t *testing.T) {
	ctx, prefix, cli := fixture(t)
	sA, sB := newStore(t, cli, prefix), newStore(t, cli, prefix)
	ttl := 5 * time.Second
	a, b := req("k", ttl), req("k", ttl)
	if _, err := sA.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	leasetest.Queued(t, ctx, sB, b, 0)
	sub, err := sA.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sA.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	wantFree(t, ctx, sA, "k", "a release with a waiter of unknown holder")
	b.Queue = true
	if _, err := sB.Acquire(ctx, b); err != nil {
		t.Fatalf("B's Acquire of the freed key: %v", err)
	}
}
