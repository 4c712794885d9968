// Package handofftest is the test suite of stores whose Release hands a key
// to the first waiter whose store listens, and whose announcement wakes that
// waiter, which then takes the key with its own Acquire (redislease,
// pglease's table mode): the hand-off itself, a waiter that missed the
// announcement, one whose store does not listen, one that gives up, one that
// died, and a forged announcement, which must grant nothing. Each store's
// own tests add what is particular to it.
package handofftest

import (
	"context"
	"crypto/rand"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
)

// Harness makes the fixtures of one subtest.
type Harness struct {
	// Pair returns two stores of one namespace on separate connections
	// (the releaser's and the waiters'), and a function that counts the
	// requests sent through the second so far. Both are closed when the
	// test ends.
	Pair func(t *testing.T) (releaser, waiters driver.Store, requests func() int)
}

// Forger acts as a client that may publish announcements and read the
// store's data but not write it: it reads the token first in key's queue
// from the store's data and sends, in the format a real hand-off would use,
// an announcement that this token was handed key with fence. It returns the
// token, or "" (sending nothing) when nobody is queued for key.
type Forger func(t *testing.T, ctx context.Context, waiters driver.Store, key string, fence uint64) (token string)

// Run runs the suite, one subtest each.
func Run(t *testing.T, h Harness) {
	t.Run("HandOff", func(t *testing.T) { testHandOff(t, h) })
	t.Run("Unread", func(t *testing.T) { testUnread(t, h) })
	t.Run("NotListening", func(t *testing.T) { testNotListening(t, h) })
	t.Run("GiveUp", func(t *testing.T) { testGiveUp(t, h) })
	t.Run("ToDeadWaiter", func(t *testing.T) { testToDeadWaiter(t, h) })
}

// Subscribe subscribes to s's announcements until the test ends.
func Subscribe(t testing.TB, s driver.Store) driver.Subscription {
	t.Helper()
	n, ok := s.(driver.Notifier)
	if !ok {
		t.Fatalf("%T does not announce releases", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := n.Subscribe(ctx)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// Announcement reads sub's next announcement within 10 s.
func Announcement(t testing.TB, ctx context.Context, sub driver.Subscription) driver.Announcement {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	a, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return a
}

// HeldBy checks that Inspect shows key held by holder, and returns its fence.
func HeldBy(t testing.TB, ctx context.Context, s driver.Store, key, holder string) uint64 {
	t.Helper()
	info, err := s.Inspect(ctx, key)
	if err != nil || !info.Held || info.Holder != holder {
		t.Fatalf("Inspect(%q) = %+v, %v; want held by %s", key, info, err, holder)
	}
	return info.Fence
}

// ReleaseTo acquires a through releaser, queues the waiters through
// waiters in that order, and releases a.
func ReleaseTo(t testing.TB, ctx context.Context, releaser, waiters driver.Store, a driver.Request, ws ...driver.Request) {
	t.Helper()
	if _, err := releaser.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		leasetest.Queued(t, ctx, waiters, w, i)
	}
	if err := releaser.Release(ctx, a); err != nil {
		t.Fatalf("%s's Release: %v", a.Holder, err)
	}
}

// Req returns a request for key with a fresh random token.
func Req(key, holder string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Token: rand.Text(), Holder: holder, TTL: ttl}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testHandOff: A's release hands the key to B, queued through a store that
// listens: the key carries B's holder and a larger fence at once, the
// announcement names B, B's Acquire takes it with one request of its own
// (the server's fence, not the announcement's), and B renews and releases
// it as its own.
func testHandOff(t *testing.T, h Harness) {
	sA, sB, requests := h.Pair(t)
	ctx := testCtx(t)
	sub := Subscribe(t, sB)
	ttl := 10 * time.Second
	a, b := Req("k", "A", ttl), Req("k", "B", ttl)
	ga, err := sA.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	leasetest.Queued(t, ctx, sB, b, 0)
	leasetest.Queued(t, ctx, sB, b, 0) // a refresh of B's entry
	if err := sA.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	fence := HeldBy(t, ctx, sA, "k", "B")
	if fence <= ga.Fence {
		t.Fatalf("handed fence %d, not above A's %d", fence, ga.Fence)
	}
	if an := Announcement(t, ctx, sub); an.Key != "k" || an.Next != b.Token {
		t.Fatalf("announcement %+v, want key k with B next", an)
	}
	before := requests()
	b.Queue = true
	g, err := sB.Acquire(ctx, b)
	if err != nil || g.Fence != fence || g.Since != 0 {
		t.Fatalf("B's Acquire = %+v, %v; want fence %d from the server", g, err, fence)
	}
	if n := requests() - before; n != 1 {
		t.Errorf("B's Acquire sent %d requests, want its own one", n)
	}
	if err := sB.Renew(ctx, b); err != nil {
		t.Fatalf("B's Renew: %v", err)
	}
	if f := HeldBy(t, ctx, sA, "k", "B"); f != fence {
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

// testUnread: a waiter whose store has not read the announcement yet (or
// missed it) asks the server, which grants it the fence it was handed; a
// second Acquire keeps it.
func testUnread(t *testing.T, h Harness) {
	sA, sB, _ := h.Pair(t)
	ctx := testCtx(t)
	Subscribe(t, sB)
	ttl := 10 * time.Second
	a, b := Req("k", "A", ttl), Req("k", "B", ttl)
	ReleaseTo(t, ctx, sA, sB, a, b)
	fence := HeldBy(t, ctx, sA, "k", "B")
	b.Queue = true
	for i := range 2 {
		if g, err := sB.Acquire(ctx, b); err != nil || g.Fence != fence || g.Since != 0 {
			t.Fatalf("B's Acquire #%d = %+v, %v; want fence %d from the server", i+1, g, err, fence)
		}
	}
}

// testNotListening: a waiter whose store has no subscription is not handed
// the key (it would not hear of it): the release frees the key, reserved
// for that waiter, as in leasetest's FIFO tests.
func testNotListening(t *testing.T, h Harness) {
	sA, sB, _ := h.Pair(t)
	ctx := testCtx(t)
	Subscribe(t, sA) // the releaser listening does not matter
	ttl := 10 * time.Second
	a, b := Req("k", "A", ttl), Req("k", "B", ttl)
	ReleaseTo(t, ctx, sA, sB, a, b)
	if info, err := sA.Inspect(ctx, "k"); err != nil || info.Held {
		t.Fatalf("Inspect = %+v, %v; want free (reserved for B)", info, err)
	}
	if _, err := sA.Acquire(ctx, Req("k", "C", ttl)); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("a newcomer's Acquire = %v, want ErrHeld (the key is B's turn)", err)
	}
	b.Queue = true
	if _, err := sB.Acquire(ctx, b); err != nil {
		t.Fatalf("B's Acquire: %v", err)
	}
}

// testGiveUp: a waiter handed the key that gives up releases it, and the key
// is handed on to the next listening waiter.
func testGiveUp(t *testing.T, h Harness) {
	sA, sB, _ := h.Pair(t)
	ctx := testCtx(t)
	subB := Subscribe(t, sB)
	ttl := 10 * time.Second
	a, b, c := Req("k", "A", ttl), Req("k", "B", ttl), Req("k", "C", ttl)
	ReleaseTo(t, ctx, sA, sB, a, b, c)
	fb := HeldBy(t, ctx, sA, "k", "B")
	if an := Announcement(t, ctx, subB); an.Next != b.Token {
		t.Fatalf("announcement %+v, want B next", an)
	}
	if err := sB.Release(ctx, b); err != nil {
		t.Fatalf("B's Release of the key handed to it: %v", err)
	}
	if fc := HeldBy(t, ctx, sA, "k", "C"); fc <= fb {
		t.Fatalf("C's fence %d, not above B's %d", fc, fb)
	}
	if an := Announcement(t, ctx, subB); an.Next != c.Token {
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

// testToDeadWaiter: a key handed to a waiter that died expires its TTL after
// the hand-off, like a dead holder's.
func testToDeadWaiter(t *testing.T, h Harness) {
	sA, sB, _ := h.Pair(t)
	ctx := testCtx(t)
	Subscribe(t, sB)
	a, b := Req("k", "A", 10*time.Second), Req("k", "B", 500*time.Millisecond)
	ReleaseTo(t, ctx, sA, sB, a, b)
	HeldBy(t, ctx, sA, "k", "B")
	leasetest.AwaitFree(t, ctx, sA, "k", 5*time.Second, 50*time.Millisecond)
	if _, err := sA.Acquire(ctx, Req("k", "D", time.Second)); err != nil {
		t.Fatalf("Acquire after the dead waiter's TTL: %v", err)
	}
}

// Forged: an announcement forged by a client that may only publish and read
// (forge), naming the queued waiter and the largest fence, grants that waiter
// nothing: through the Store, B's Acquire is refused while A holds the key;
// a lease.Client's waiting Acquire goes on waiting. After A's real release,
// each gets the key with the server's fence.
func Forged(t *testing.T, h Harness, forge Forger) {
	t.Run("Store", func(t *testing.T) { testForgedStore(t, h, forge) })
	t.Run("Client", func(t *testing.T) { testForgedClient(t, h, forge) })
}

// forgedFence is the fence a forged announcement names: the largest a
// PostgreSQL bigint fence can take, which a fenced resource would then hold
// against every later holder.
const forgedFence = math.MaxInt64

func testForgedStore(t *testing.T, h Harness, forge Forger) {
	sA, sB, _ := h.Pair(t)
	ctx := testCtx(t)
	sub := Subscribe(t, sB)
	ttl := 10 * time.Second
	a, b := Req("k", "A", ttl), Req("k", "B", ttl)
	ga, err := sA.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	leasetest.Queued(t, ctx, sB, b, 0)
	if tok := forge(t, ctx, sB, "k", forgedFence); tok != b.Token {
		t.Fatalf("the forger read token %q first in the queue, want B's %q", tok, b.Token)
	}
	if an := Announcement(t, ctx, sub); an.Key != "k" || an.Next != b.Token {
		t.Fatalf("B's store heard %+v, want the forged announcement (key k, B next)", an)
	}
	b.Queue = true
	if g, err := sB.Acquire(ctx, b); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("B's Acquire after the forged announcement = %+v, %v; want ErrHeld (A holds the key)", g, err)
	}
	if f := HeldBy(t, ctx, sA, "k", "A"); f != ga.Fence {
		t.Fatalf("A's fence %d after the forgery, want %d", f, ga.Fence)
	}
	if err := sA.Renew(ctx, a); err != nil {
		t.Fatalf("A's Renew after the forgery: %v", err)
	}
	if err := sA.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	fence := HeldBy(t, ctx, sA, "k", "B")
	g, err := sB.Acquire(ctx, b)
	if err != nil || g.Fence != fence || g.Fence == forgedFence || g.Fence <= ga.Fence {
		t.Fatalf("B's Acquire after A's release = %+v, %v; want the server's fence %d (above A's %d)", g, err, fence, ga.Fence)
	}
	if err := sB.Release(ctx, b); err != nil {
		t.Fatalf("B's Release: %v", err)
	}
}

// testForgedClient: a lease.Client waiting in Acquire behind A is woken by
// the forged announcement and goes on waiting (for at least a second, while
// A holds the key), then gets the key with the server's fence after A's
// release.
func testForgedClient(t *testing.T, h Harness, forge Forger) {
	sA, sB, _ := h.Pair(t)
	ctx := testCtx(t)
	a := Req("k", "A", 10*time.Second)
	ga, err := sA.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	c, err := lease.New(sB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	type result struct {
		l   *lease.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.Acquire(ctx, "k")
		got <- result{l, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for forge(t, ctx, sB, "k", forgedFence) == "" {
		if time.Now().After(deadline) {
			t.Fatal("the Client's waiter was not queued within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case r := <-got:
		fence := uint64(0)
		if r.l != nil {
			fence = r.l.Fence()
		}
		t.Fatalf("the Client's Acquire returned after the forged announcement while A holds the key: fence %d, %v", fence, r.err)
	case <-time.After(time.Second):
	}
	if f := HeldBy(t, ctx, sA, "k", "A"); f != ga.Fence {
		t.Fatalf("A's fence %d after the forgery, want %d", f, ga.Fence)
	}
	if err := sA.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the Client's Acquire did not return within 10s of A's release")
	}
	if r.err != nil {
		t.Fatalf("the Client's Acquire after A's release: %v", r.err)
	}
	info, err := sA.Inspect(ctx, "k")
	if err != nil || !info.Held || r.l.Fence() != info.Fence || r.l.Fence() == forgedFence || r.l.Fence() <= ga.Fence {
		t.Fatalf("the Client holds fence %d; Inspect = %+v, %v; want the server's fence, above A's %d", r.l.Fence(), info, err, ga.Fence)
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatalf("the Client's Release: %v", err)
	}
}
