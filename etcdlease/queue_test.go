// The FIFO queue of waiters: the FIFO conformance subtests on a single node
// and a cluster, the layout and expiry of queue entries, round trips,
// announcements of queue changes and Close.

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

// entryKey is the etcd key of token's entry in key's queue.
func entryKey(prefix, key, token string) string { return prefix + key + "\x00q/" + token }

// TestQueueEntries: a waiter's entry is an etcd key beside the lease key, on
// an etcd lease of its own with the waiter's TTL; it expires a TTL after the
// waiter's last attempt even while the store's own etcd lease for that TTL
// is kept alive, and it is deleted when its waiter acquires.
func TestQueueEntries(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	prefix := testPrefix()
	s := newStore(t, cli, prefix)
	ttl := 2 * time.Second
	holder := req("k", ttl)
	if _, err := s.Acquire(ctx, holder); err != nil {
		t.Fatal(err)
	}
	storeLease, _ := leaseOf(t, ctx, cli, prefix, "k")

	w := req("k", 2100*time.Millisecond) // rounds up to 3s
	w.Holder = "waiter-w"
	if he := leasetest.Queued(t, ctx, s, w, 0); he.Holder != holder.Holder || he.Fence == 0 {
		t.Errorf("HeldError = %+v, want the holder %q and its fence", he, holder.Holder)
	}
	resp, err := cli.Get(ctx, entryKey(prefix, "k", w.Token))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get of w's entry = %v, %v; want the entry", resp, err)
	}
	kv := resp.Kvs[0]
	if string(kv.Value) != "waiter-w" {
		t.Errorf("entry value %q, want the waiter's holder", kv.Value)
	}
	if clientv3.LeaseID(kv.Lease) == storeLease || kv.Lease == 0 {
		t.Errorf("entry on etcd lease %x, want its own (the store's is %x)", kv.Lease, storeLease)
	}
	if ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err != nil || ttl.GrantedTTL != 3 {
		t.Errorf("entry's etcd lease TTL = %v, %v; want 3s (2.1s rounded up)", ttl, err)
	}
	// The lease key's own reads do not see the entry.
	if info, err := s.Inspect(ctx, "k"); err != nil || info.Holder != holder.Holder {
		t.Errorf("Inspect = %+v, %v", info, err)
	}

	// A second waiter, refreshed while w is not; the holder keeps renewing
	// the store's etcd lease (which w's entry is not on).
	x := req("k", ttl)
	leasetest.Queued(t, ctx, s, x, 1)
	last := time.Now()
	for {
		if err := s.Renew(ctx, holder); err != nil {
			t.Fatalf("holder's Renew: %v", err)
		}
		xr := x
		xr.Queue = true
		_, err := s.Acquire(ctx, xr)
		var he *lease.HeldError
		if !errors.As(err, &he) {
			t.Fatalf("x's queued Acquire = %v, want a HeldError", err)
		}
		if he.Queued == 0 {
			break
		}
		if time.Since(last) > 3*time.Second+5*time.Second { // w's 3s TTL, generous margin
			t.Fatalf("w's entry still queued %v after its last attempt", time.Since(last))
		}
		time.Sleep(300 * time.Millisecond)
	}
	gone := time.Since(last)
	t.Logf("w's entry expired %v after its last attempt, the store's etcd lease kept alive", gone.Round(time.Millisecond))
	if gone < 2*time.Second {
		t.Errorf("w's entry expired %v after its last attempt, before its 3s TTL", gone)
	}
	if resp, err := cli.Get(ctx, entryKey(prefix, "k", w.Token)); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("w's entry after its expiry: %v, %v", resp, err)
	}
	// x acquires once the key is released; its entry goes.
	if err := s.Release(ctx, holder); err != nil {
		t.Fatal(err)
	}
	x.Queue = true
	if _, err := s.Acquire(ctx, x); err != nil {
		t.Fatalf("x's Acquire at the head of the queue: %v", err)
	}
	if resp, err := cli.Get(ctx, prefix+"k\x00", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the queue after x acquired: %v, %v; want it empty", resp, err)
	}
	// Keys with a NUL byte would collide with queues: refused.
	if _, err := s.Acquire(ctx, req("k\x00q/"+x.Token, ttl)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Acquire of a key with a NUL byte: %v, want ErrInvalid", err)
	}
}

// TestQueueRoundTrips counts the calls of queued acquisitions.
func TestQueueRoundTrips(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli, cnt := countingCli(t)
	prefix := testPrefix()
	s := newStore(t, cli, prefix)
	want := func(op string, exp map[string]int) {
		t.Helper()
		got := cnt.take()
		total := 0
		for _, n := range got {
			total += n
		}
		t.Logf("%s: %d round trips %v", op, total, got)
		ok := len(got) == len(exp)
		for m, n := range exp {
			ok = ok && got[m] == n
		}
		if !ok {
			t.Errorf("%s: calls %v, want %v", op, got, exp)
		}
	}
	ttl := 2 * time.Second
	a := req("k", ttl)
	if _, err := s.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	b, c := req("k", ttl), req("k", ttl)
	cnt.take()
	leasetest.Queued(t, ctx, s, b, 0)
	// The entry's put is a transaction that also counts the queue (the cap
	// of waiters, WithMaxWaiters).
	want("first queued Acquire", map[string]int{"Txn": 2, "LeaseGrant": 1})
	leasetest.Queued(t, ctx, s, b, 0)
	want("queued Acquire, entry refreshed less than a quarter TTL ago", map[string]int{"Txn": 1})
	time.Sleep(ttl / 4)
	leasetest.Queued(t, ctx, s, b, 0)
	want("queued Acquire, refresh", map[string]int{"LeaseKeepAlive": 1, "Txn": 1})
	leasetest.Queued(t, ctx, s, c, 1)
	cnt.take()
	if _, err := s.Acquire(ctx, req("k", ttl)); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("unqueued Acquire of a held key: %v", err)
	}
	want("unqueued Acquire of a held key", map[string]int{"Txn": 1})
	if err := s.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	want("Release", map[string]int{"Txn": 1})
	b.Queue = true
	if _, err := s.Acquire(ctx, b); err != nil {
		t.Fatal(err)
	}
	want("Acquire by the queue's head", map[string]int{"Txn": 1})
	if err := s.Release(ctx, c); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release of a queued token: %v, want ErrNotHeld", err)
	}
	want("Release of a queued token (giving up)", map[string]int{"Txn": 1})
	// The etcd leases of B's and C's entries carry nothing now: spares.
	d := req("k", ttl)
	leasetest.Queued(t, ctx, s, d, 0)
	want("first queued Acquire, on a spare etcd lease", map[string]int{"Txn": 1})

	// A head whose store did not write its entry (another store of the same
	// client would not exist; another process could): one more transaction.
	if err := s.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	s2 := newStore(t, cli, prefix)
	if _, err := s2.Acquire(ctx, req("warm", ttl)); err != nil {
		t.Fatal(err)
	}
	cnt.take()
	if _, err := s2.Acquire(ctx, d); err != nil {
		t.Fatal(err)
	}
	want("Acquire by the queue's head through another store", map[string]int{"Txn": 2})
}

// TestSubscribeQueue: the subscription announces a key when a waiter's
// entry goes (given up or expired) but not when its waiter acquires it.
func TestSubscribeQueue(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	prefix := testPrefix()
	s := newStore(t, cli, prefix)
	// Another store acquires and releases: one without a subscription knows
	// no waiter to hand the key to, so every release deletes it.
	w := newStore(t, cli, prefix)
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	next := func(want string, d time.Duration) {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		got, err := sub.Next(nctx)
		if err != nil || got != want {
			t.Fatalf("Next = %q, %v; want %q", got, err, want)
		}
	}
	quiet := func(what string) {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
		defer cancel()
		if got, err := sub.Next(nctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next after %s = %q, %v; want no announcement", what, got, err)
		}
	}
	ttl := 2 * time.Second
	a, b, c, d := req("k", ttl), req("k", ttl), req("k", ttl), req("k", ttl)
	if _, err := w.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	leasetest.Queued(t, ctx, w, b, 0)
	leasetest.Queued(t, ctx, w, c, 1)
	leasetest.Queued(t, ctx, w, d, 2)
	dLast := time.Now()
	quiet("queueing")
	if err := w.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	next("k", 2*time.Second)
	b.Queue = true
	if _, err := w.Acquire(ctx, b); err != nil {
		t.Fatal(err)
	}
	quiet("the head acquired")
	if err := w.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	next("k", 2*time.Second)
	// C, now first on a free key, gives up: D may go.
	if err := w.Release(ctx, c); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("C's Release: %v, want ErrNotHeld", err)
	}
	next("k", 2*time.Second)
	leasetest.Queued(t, ctx, w, req("k", ttl), 1) // D is first now: a newcomer waits behind it
	// D stops trying: its entry expires after its TTL, and that is announced.
	for {
		nctx, cancel := context.WithTimeout(ctx, 8*time.Second)
		got, err := sub.Next(nctx)
		cancel()
		if err != nil || got != "k" {
			t.Fatalf("Next = %q, %v; want the expiry of D's entry announced", got, err)
		}
		if resp, err := cli.Get(ctx, entryKey(prefix, "k", d.Token)); err == nil && len(resp.Kvs) == 0 {
			break
		}
	}
	t.Logf("D's expiry announced %v after its last attempt", time.Since(dLast).Round(time.Millisecond))
}

// TestQueueClose: closing a store takes its waiters out of their queues at
// once.
func TestQueueClose(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	prefix := testPrefix()
	s1 := newStore(t, cli, prefix)
	ttl := 5 * time.Second
	a := req("k", ttl)
	if _, err := s1.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	s2, err := etcdlease.New(cli, etcdlease.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	b, c := req("k", ttl), req("k", ttl)
	leasetest.Queued(t, ctx, s2, b, 0)
	leasetest.Queued(t, ctx, s1, c, 1)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if resp, err := cli.Get(ctx, entryKey(prefix, "k", b.Token)); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("B's entry after its store closed: %v, %v; want it gone", resp, err)
	}
	if err := s1.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	c.Queue = true
	if _, err := s1.Acquire(ctx, c); err != nil {
		t.Fatalf("C's Acquire after B's store closed: %v", err)
	}
}
