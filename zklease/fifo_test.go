// FIFO queue of waiters: the leasetest FIFO subtests, the znode layout of a
// queue, predecessor-only wake-ups (no herd) and a waiter's session expiry.

package zklease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/zklease"
)

// subscribe opens a subscription on s, closed at cleanup.
func subscribe(t *testing.T, s *zklease.Store) lease.Subscription {
	t.Helper()
	sub, err := s.Subscribe(testCtx(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// wantWoken wants sub to announce key within a generous bound.
func wantWoken(t *testing.T, sub lease.Subscription, key, who string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got, err := sub.Next(ctx)
	if err != nil || got != key {
		t.Fatalf("%s's subscription: Next = %q, %v; want %q", who, got, err, key)
	}
}

// wantQuiet wants sub to announce nothing for d.
func wantQuiet(t *testing.T, sub lease.Subscription, d time.Duration, who string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if got, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s's subscription was woken: Next = %q, %v; want nothing for %v", who, got, err, d)
	}
}

// TestQueueLayout: a queued waiter keeps its protected ephemeral sequential
// node, marked waiting, in arrival order behind the holder's; Inspect of a
// key reserved for a waiter reports it free; Release of a waiter removes its
// node and reports ErrNotHeld; Renew of a queued token is ErrNotHeld.
func TestQueueLayout(t *testing.T) {
	ctx, s1, s2, raw := twoStores(t, "queue-layout")
	key, ttl := "q", 4*testTTL
	a := lease.Request{Key: key, Token: token(), Holder: "A", TTL: ttl}
	b := lease.Request{Key: key, Token: token(), Holder: "B", TTL: ttl}
	c := lease.Request{Key: key, Token: token(), Holder: "C", TTL: ttl}
	if _, err := s1.Acquire(ctx, a); err != nil {
		t.Fatalf("A's Acquire: %v", err)
	}
	leasetest.Queued(t, ctx, s2, b, 0)
	leasetest.Queued(t, ctx, s1, c, 1)
	parent := s1.Root() + "/" + key
	kids, _, err := raw.Children(parent)
	if err != nil {
		t.Fatalf("Children(%s): %v", parent, err)
	}
	if len(kids) != 3 {
		t.Fatalf("children of %s = %v, want the holder's node and two waiters'", parent, kids)
	}
	byToken := map[string]string{}
	seqOf := map[string]string{}
	for _, k := range kids {
		for _, r := range []lease.Request{a, b, c} {
			if strings.HasPrefix(k, "_c_"+r.Token+"-") {
				byToken[r.Holder] = k
				seqOf[r.Holder] = k[len(k)-10:]
			}
		}
	}
	if len(byToken) != 3 || !(seqOf["A"] < seqOf["B"] && seqOf["B"] < seqOf["C"]) {
		t.Fatalf("children %v: want _c_<token>-<sequence> nodes of A, B, C in that order", kids)
	}
	for holder, waiting := range map[string]bool{"A": false, "B": true, "C": true} {
		data, st, err := raw.Get(parent + "/" + byToken[holder])
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if st.EphemeralOwner == 0 {
			t.Errorf("%s's node is not ephemeral", holder)
		}
		if got := strings.Contains(string(data), `"waiting":true`); got != waiting {
			t.Errorf("%s's node data %s: waiting mark %v, want %v", holder, data, got, waiting)
		}
	}
	if err := s2.Renew(ctx, b); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew of a queued token: %v, want ErrNotHeld", err)
	}
	if err := s1.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	if info, err := s1.Inspect(ctx, key); err != nil || info.Held {
		t.Errorf("Inspect of a key reserved for B: %+v, %v; want free", info, err)
	}
	// C gives up through a store that never saw its node.
	if err := s2.Release(ctx, c); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Release of queued C: %v, want ErrNotHeld", err)
	}
	if kids, _, _ := raw.Children(parent); len(kids) != 1 || kids[0] != byToken["B"] {
		t.Errorf("after C left: children %v, want only B's node", kids)
	}
	b.Queue = true
	g, err := s2.Acquire(ctx, b)
	if err != nil {
		t.Fatalf("B's Acquire, first in the queue: %v", err)
	}
	_, st, err := raw.Get(parent + "/" + byToken["B"])
	if err != nil || uint64(st.Czxid) != g.Fence {
		t.Errorf("B's fence %d, want its queue node's czxid (%v, %v)", g.Fence, st, err)
	}
	if info, err := s1.Inspect(ctx, key); err != nil || !info.Held || info.Holder != "B" {
		t.Errorf("Inspect after B acquired: %+v, %v; want held by B", info, err)
	}
	if err := s2.Renew(ctx, b); err != nil {
		t.Errorf("B's Renew: %v", err)
	}
	if err := s2.Release(ctx, b); err != nil {
		t.Errorf("B's Release: %v", err)
	}
}

// TestQueueWakesPredecessorOnly: each waiter watches only its predecessor,
// so the holder's release wakes the first waiter and not the second, and the
// first waiter's release wakes the second.
func TestQueueWakesPredecessorOnly(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 60*time.Second)
	s1 := dial(t, srvs, zklease.WithRoot(root("queue-herd")))
	s2 := dial(t, srvs, zklease.WithRoot(s1.Root()))
	s3 := dial(t, srvs, zklease.WithRoot(s1.Root()))
	sub2, sub3 := subscribe(t, s2), subscribe(t, s3)
	key, ttl := "herd", 4*testTTL
	a := lease.Request{Key: key, Token: token(), Holder: "A", TTL: ttl}
	b := lease.Request{Key: key, Token: token(), Holder: "B", TTL: ttl, Queue: true}
	c := lease.Request{Key: key, Token: token(), Holder: "C", TTL: ttl, Queue: true}
	if _, err := s1.Acquire(ctx, a); err != nil {
		t.Fatalf("A's Acquire: %v", err)
	}
	leasetest.Queued(t, ctx, s2, b, 0)
	leasetest.Queued(t, ctx, s3, c, 1)
	leasetest.Queued(t, ctx, s3, c, 1) // a refresh: still one watch, on B
	if err := s1.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	wantWoken(t, sub2, key, "B")
	wantQuiet(t, sub3, time.Second, "C (queued behind B)")
	if _, err := s2.Acquire(ctx, b); err != nil {
		t.Fatalf("B's Acquire after the wake-up: %v", err)
	}
	leasetest.Queued(t, ctx, s3, c, 0)
	if err := s2.Release(ctx, b); err != nil {
		t.Fatalf("B's Release: %v", err)
	}
	wantWoken(t, sub3, key, "C")
	if _, err := s3.Acquire(ctx, c); err != nil {
		t.Fatalf("C's Acquire after the wake-up: %v", err)
	}
}

// TestQueueWaiterSessionEnds: ZooKeeper removes the node of a waiter whose
// session ends; the waiter behind it is woken and moves up.
func TestQueueWaiterSessionEnds(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 60*time.Second)
	s1 := dial(t, srvs, zklease.WithRoot(root("queue-session")))
	dead := dial(t, srvs, zklease.WithRoot(s1.Root()))
	s3 := dial(t, srvs, zklease.WithRoot(s1.Root()))
	sub3 := subscribe(t, s3)
	key, ttl := "session", 4*testTTL
	a := lease.Request{Key: key, Token: token(), Holder: "A", TTL: ttl}
	b := lease.Request{Key: key, Token: token(), Holder: "B", TTL: ttl}
	c := lease.Request{Key: key, Token: token(), Holder: "C", TTL: ttl}
	if _, err := s1.Acquire(ctx, a); err != nil {
		t.Fatalf("A's Acquire: %v", err)
	}
	leasetest.Queued(t, ctx, dead, b, 0)
	leasetest.Queued(t, ctx, s3, c, 1)
	if err := dead.Close(); err != nil { // ends B's session
		t.Fatalf("Close: %v", err)
	}
	wantWoken(t, sub3, key, "C")
	leasetest.Queued(t, ctx, s3, c, 0)
	if err := s1.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	c.Queue = true
	if _, err := s3.Acquire(ctx, c); err != nil {
		t.Fatalf("C's Acquire: %v", err)
	}
}

// TestQueueGrantRecordLater: with Request.RecordLater (the Client's queued
// attempts) a queue entry carries no waiting mark, so the first entry reads
// as the holder as soon as it is the lowest, and an entry written recently
// becomes the lease without another write: the grant has the entry's czxid
// as fence and a positive Since (the TTL runs from the entry's last write),
// with nothing left to record.
func TestQueueGrantRecordLater(t *testing.T) {
	ctx, s1, s2, raw := twoStores(t, "record-later")
	key, ttl := "q", 4*testTTL
	a := lease.Request{Key: key, Token: token(), Holder: "A", TTL: ttl}
	b := lease.Request{Key: key, Token: token(), Holder: "B", TTL: ttl, RecordLater: true}
	c := lease.Request{Key: key, Token: token(), Holder: "C", TTL: ttl}
	if _, err := s1.Acquire(ctx, a); err != nil {
		t.Fatalf("A's Acquire: %v", err)
	}
	leasetest.Queued(t, ctx, s2, b, 0)
	parent := s1.Root() + "/" + key
	kids, _, err := raw.Children(parent)
	if err != nil || len(kids) != 2 {
		t.Fatalf("children of %s = %v, %v; want A's node and B's entry", parent, kids, err)
	}
	bPath := parent + "/" + sortedLast(kids)
	data, before, err := raw.Get(bPath)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if before.Version != 0 || strings.Contains(string(data), `"waiting":true`) {
		t.Errorf("B's entry: version %d, data %s; want it as created (no waiting mark, no second write)", before.Version, data)
	}
	if err := s1.Release(ctx, a); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	if info, err := s1.Inspect(ctx, key); err != nil || !info.Held || info.Holder != "B" || info.Fence != uint64(before.Czxid) {
		t.Errorf("Inspect once B's entry is the lowest: %+v, %v; want held by B, fence %d", info, err, before.Czxid)
	}
	b.Queue = true
	g, err := s2.Acquire(ctx, b)
	if err != nil {
		t.Fatalf("B's Acquire, first in the queue: %v", err)
	}
	if uint64(before.Czxid) != g.Fence {
		t.Errorf("B's fence %d, want its entry's czxid %d", g.Fence, before.Czxid)
	}
	if g.Since <= 0 || g.Since >= ttl/2 || g.Unrecorded {
		t.Errorf("Grant{Since: %v, Unrecorded: %v}, want Since in (0, %v), recorded", g.Since, g.Unrecorded, ttl/2)
	}
	if _, after, err := raw.Get(bPath); err != nil || after.Version != before.Version {
		t.Errorf("B's node after the grant: %v, %v; want no write (version %d)", after, err, before.Version)
	}
	if _, err := s1.Acquire(ctx, c); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("C's Acquire while B holds: %v, want ErrHeld", err)
	}
	if err := s2.Renew(ctx, b); err != nil {
		t.Fatalf("B's Renew: %v", err)
	}
	if info, err := s1.Inspect(ctx, key); err != nil || !info.Held || info.Holder != "B" || info.Fence != g.Fence {
		t.Errorf("Inspect after B's renewal: %+v, %v; want held by B with fence %d", info, err, g.Fence)
	}
	if err := s2.Release(ctx, b); err != nil {
		t.Errorf("B's Release: %v", err)
	}
}

// sortedLast returns the child with the highest sequence number.
func sortedLast(kids []string) string {
	last := kids[0]
	for _, k := range kids[1:] {
		if k[len(k)-10:] > last[len(last)-10:] {
			last = k
		}
	}
	return last
}

// twoStores returns a test context and two stores (two sessions) over one
// fresh root named after name, and a plain connection to read the nodes.
func twoStores(t *testing.T, name string) (context.Context, *zklease.Store, *zklease.Store, *zk.Conn) {
	t.Helper()
	srvs := servers(t)
	ctx := testCtx(t, 30*time.Second)
	s1 := dial(t, srvs, zklease.WithRoot(root(name)))
	s2 := dial(t, srvs, zklease.WithRoot(s1.Root()))
	return ctx, s1, s2, connect(t, srvs)
}
