// The etcd leases behind the keys: what the suite cannot see.

package etcdlease_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
)

// TestEtcdLeases: each acquisition and each queue entry has its own etcd
// lease of the TTL rounded up to seconds; a grant from the queue moves the
// key onto the entry's lease; Release revokes; Renew keeps the key's etcd
// lease alive, pipelined, and notices when it is gone.
func TestEtcdLeases(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	prefix := testPrefix()
	s := newStore(t, cli, prefix)
	// leaseOf returns the etcd lease of etcd key k and its granted TTL (-1
	// if the key is gone).
	leaseOf := func(k string) (clientv3.LeaseID, int64) {
		t.Helper()
		resp, err := cli.Get(ctx, k)
		if err != nil || len(resp.Kvs) == 0 {
			return 0, -1
		}
		ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
		if err != nil {
			t.Fatalf("TimeToLive: %v", err)
		}
		return ttl.ID, ttl.GrantedTTL
	}
	req := func(key, holder string, ttl time.Duration) driver.Request {
		return driver.Request{Key: key, Token: randHex(16), Holder: holder, TTL: ttl}
	}
	a, b := req("k", "a", 2100*time.Millisecond), req("other", "b", 2*time.Second)
	if _, err := s.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, b); err != nil {
		t.Fatal(err)
	}
	ida, ttla := leaseOf(prefix + "k")
	idb, ttlb := leaseOf(prefix + "other")
	if ttla != 3 || ttlb != 2 || ida == idb {
		t.Errorf("etcd leases %x (%ds for 2.1s) and %x (%ds for 2s), want 3s and 2s, apart", ida, ttla, idb, ttlb)
	}

	w := req("k", "w", 5*time.Second)
	leasetest.Queued(t, ctx, s, w, 0)
	idw, ttlw := leaseOf(prefix + "k\x00q/" + w.Token)
	if ttlw != 5 || idw == ida {
		t.Errorf("the waiter's entry is on %x for %ds, want its own lease of 5s", idw, ttlw)
	}
	if err := s.Release(ctx, a); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if ttl, err := cli.TimeToLive(ctx, ida); err != nil || ttl.TTL != -1 {
		t.Errorf("the holder's lease after Release: %+v, %v; want revoked", ttl, err)
	}
	w.Queue = true
	if _, err := s.Acquire(ctx, w); err != nil {
		t.Fatalf("the waiter's Acquire: %v", err)
	}
	if id, _ := leaseOf(prefix + "k"); id != idw {
		t.Errorf("the waiter holds the key on %x, want its entry's lease %x", id, idw)
	}
	if _, ttl := leaseOf(prefix + "k\x00q/" + w.Token); ttl != -1 {
		t.Errorf("the waiter's entry is still there after its grant")
	}

	// Renew trusts the etcd lease of a key the store granted: the key lives
	// as long as it. Another store reads the key first.
	if errs := s.RenewMany(ctx, slices.Repeat([]driver.Request{b}, 1200)); errs[0] != nil || errs[1199] != nil {
		t.Errorf("RenewMany of one lease 1200 times: %v, %v", errs[0], errs[1199])
	}
	if _, err := cli.Delete(ctx, prefix+"other"); err != nil {
		t.Fatal(err)
	}
	if err := newStore(t, cli, prefix).Renew(ctx, b); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("another store's Renew of a key deleted behind the store = %v, want ErrNotHeld", err)
	}
	if _, err := cli.Revoke(ctx, idb); err != nil {
		t.Fatal(err)
	}
	errs := s.RenewMany(ctx, []driver.Request{w, b, w})
	if errs[0] != nil || !errors.Is(errs[1], lease.ErrNotHeld) || errs[2] != nil {
		t.Errorf("RenewMany after the key's etcd lease was revoked = %v, want nil, ErrNotHeld, nil", errs)
	}
}

// TestHandOff: a store with an open subscription that knows the queue's
// head hands the key over in the release, with a larger fence, and announces
// the waiter; the waiter's Acquire gets that fence; the releaser's etcd lease
// is the store's next grant.
func TestHandOff(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	s := newStore(t, cli, testPrefix())
	a := driver.Request{Key: "k", Token: randHex(16), Holder: "a", TTL: 5 * time.Second}
	w := driver.Request{Key: "k", Token: randHex(16), Holder: "w", TTL: 5 * time.Second, Queue: true}
	ga, err := s.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	leaseOf := func(key string) int64 {
		t.Helper()
		resp, err := cli.Get(ctx, s.Prefix()+key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("Get %q: %v, %v", key, resp, err)
		}
		return resp.Kvs[0].Lease
	}
	ida := leaseOf("k")
	leasetest.Queued(t, ctx, s, w, 0)
	sub, err := s.Subscribe(ctx) // its first read sees w's entry
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := s.Release(ctx, a); err != nil {
		t.Fatalf("Release: %v", err)
	}
	info, err := s.Inspect(ctx, "k")
	if err != nil || info.Holder != "w" || info.Fence <= ga.Fence {
		t.Fatalf("after the release: Inspect = %+v, %v; want handed to w with a fence above %d", info, err, ga.Fence)
	}
	if got, err := sub.Next(ctx); err != nil || got != (driver.Announcement{Key: "k", Next: w.Token}) {
		t.Errorf("announcement %+v, %v; want k with w next", got, err)
	}
	if g, err := s.Acquire(ctx, w); err != nil || g.Fence != info.Fence {
		t.Errorf("w's Acquire = %+v, %v; want fence %d", g, err, info.Fence)
	}
	// a's etcd lease carries nothing now: the store keeps it for its next
	// grant of the same TTL, instead of revoking it and granting another.
	b := driver.Request{Key: "other", Token: randHex(16), Holder: "b", TTL: 5 * time.Second}
	if _, err := s.Acquire(ctx, b); err != nil {
		t.Fatal(err)
	}
	if id := leaseOf("other"); id != ida {
		t.Errorf("b's key is on etcd lease %x, want a's former lease %x", id, ida)
	}
}
