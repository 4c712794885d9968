// Listing at one revision and breaking: what the suite cannot see.

package etcdlease_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
)

// TestListOneRevision: a page that ends inside a key's etcd keys reads the
// rest of them; later pages see the revision of the first, so a key released
// since is still listed and one acquired since is not.
func TestListOneRevision(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	s := newStore(t, cli, testPrefix())
	req := func(key string) driver.Request {
		return driver.Request{Key: key, Token: randHex(16), Holder: key, TTL: 10 * time.Second}
	}
	a, b, c := req("a"), req("b"), req("c")
	for _, r := range []driver.Request{a, b} {
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var waiters []driver.Request
	for i := range 3 {
		w := req("a")
		w.Shared = i == 1
		leasetest.Queued(t, ctx, s, w, i)
		waiters = append(waiters, w)
	}
	page, next, err := s.List(ctx, "", "", 2)
	if err != nil || len(page) != 1 || next == "" {
		t.Fatalf("List(limit 2) = %+v, %q, %v; want key a alone and a cursor", page, next, err)
	}
	if e := page[0]; len(e.Holders) != 1 || e.Holders[0].Token != a.Token || e.Holders[0].Remaining < 8*time.Second || len(e.Waiters) != 3 {
		t.Errorf("key a = %+v; want its holder, about 10s left, and 3 waiters", e)
	}
	for i, w := range page[0].Waiters {
		if w.Token != waiters[i].Token || w.Shared != waiters[i].Shared {
			t.Errorf("waiter %d = %+v, want %+v, in queue order", i, w, waiters[i])
		}
	}
	if err := s.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, c); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for next != "" {
		if page, next, err = s.List(ctx, "", next, 2); err != nil {
			t.Fatalf("List(cursor %q): %v", next, err)
		}
		for _, e := range page {
			keys = append(keys, e.Key)
		}
	}
	if len(keys) != 1 || keys[0] != "b" {
		t.Errorf("the pages after the first list %q, want b alone, as of the first page's revision", keys)
	}
	if _, _, err := s.List(ctx, "", "1/elsewhere", 2); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("List with a cursor outside the prefix = %v, want ErrInvalid", err)
	}
}

// TestBreakRevokesLeft: the evicted hold's etcd lease is revoked, its
// tombstone lives on its own lease; a Break cut off before its revokes is
// finished by the next Break of the key, which revokes what the tombstones
// name.
func TestBreakRevokesLeft(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	prefix := testPrefix()
	s := newStore(t, cli, prefix)
	r := driver.Request{Key: "k", Token: randHex(16), Holder: "stuck", TTL: 10 * time.Second}
	if _, err := s.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, prefix+"k")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get: %v, %v", resp, err)
	}
	held := clientv3.LeaseID(resp.Kvs[0].Lease)
	if _, err := s.Break(ctx, "k"); err != nil {
		t.Fatalf("Break: %v", err)
	}
	if ttl, err := cli.TimeToLive(ctx, held); err != nil || ttl.TTL != -1 {
		t.Errorf("the evicted etcd lease after Break: %+v, %v; want revoked", ttl, err)
	}
	tomb, err := cli.Get(ctx, prefix+"k\x00b/"+r.Token)
	if err != nil || len(tomb.Kvs) != 1 || tomb.Kvs[0].Lease == int64(held) {
		t.Fatalf("the tombstone: %v, %v; want one, on a lease of its own", tomb, err)
	}
	if ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(tomb.Kvs[0].Lease)); err != nil || ttl.TTL < 9 {
		t.Errorf("the tombstone's lease: %+v, %v; want the evicted hold's 10s", ttl, err)
	}

	left, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, prefix+"k\x00b/"+randHex(16), strconv.FormatInt(int64(left.ID), 10), clientv3.WithLease(left.ID)); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Break(ctx, "k"); err != nil || len(e.Holders) != 0 || len(e.Broken) != 2 {
		t.Fatalf("Break of the free key = %+v, %v; want no holder and 2 tombstones", e, err)
	}
	if ttl, err := cli.TimeToLive(ctx, left.ID); err != nil || ttl.TTL != -1 {
		t.Errorf("the etcd lease a tombstone names after the next Break: %+v, %v; want revoked", ttl, err)
	}
}
