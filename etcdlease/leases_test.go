// The etcd leases behind the keys: what the suite cannot see.

package etcdlease_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
)

// TestEtcdLeases: each lone acquisition and each queue entry has its own
// etcd lease of the TTL rounded up to seconds; a grant from the queue moves the
// key onto the entry's lease; Release keeps the lease, empty, for the next
// grant of its TTL; Renew keeps the key's etcd lease alive, pipelined, and
// notices when it is gone.
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
	if ttl, err := cli.TimeToLive(ctx, ida, clientv3.WithAttachedKeys()); err != nil || ttl.TTL <= 0 || len(ttl.Keys) != 0 {
		t.Errorf("the holder's lease after Release: %+v, %v; want alive and carrying nothing (a spare)", ttl, err)
	}
	c := req("c", "c", 3*time.Second) // the spare's TTL: the store's next grant of it
	if _, err := s.Acquire(ctx, c); err != nil {
		t.Fatal(err)
	}
	if id, _ := leaseOf(prefix + "c"); id != ida {
		t.Errorf("the next grant of 3s is %x, want the spare %x", id, ida)
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

// TestSharedLayout: each reader has its own key on its own etcd lease; the
// first reader of an epoch puts the epoch's key, on no etcd lease, whose mod
// revision is the readers' fence; a writer's grant deletes it. Another
// store renews readers and writers together by reading their keys; neither
// renewals nor releases depend on Request.Shared.
func TestSharedLayout(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	s := newStore(t, cli, testPrefix())
	get := func(k string) *mvccpb.KeyValue {
		t.Helper()
		resp, err := cli.Get(ctx, s.Prefix()+k)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		return resp.Kvs[0]
	}
	req := func(key, holder string, shared bool) driver.Request {
		return driver.Request{Key: key, Token: randHex(16), Holder: holder, TTL: 3 * time.Second, Shared: shared}
	}
	r1, r2, w := req("k", "r1", true), req("k", "r2", true), req("other", "w", false)
	var fences []uint64
	for _, r := range []driver.Request{r1, r2, w} {
		g, err := s.Acquire(ctx, r)
		if err != nil {
			t.Fatalf("Acquire for %s: %v", r.Holder, err)
		}
		fences = append(fences, g.Fence)
	}
	k1, k2, e := get("k\x00r/"+r1.Token), get("k\x00r/"+r2.Token), get("k\x00e/")
	switch {
	case k1 == nil || k2 == nil || string(k1.Value) != "r1" || k1.Lease == 0 || k2.Lease == 0 || k1.Lease == k2.Lease:
		t.Errorf("reader keys %v and %v, want each on its own etcd lease, valued with its holder", k1, k2)
	case e == nil || e.Lease != 0 || uint64(e.ModRevision) != fences[0] || fences[1] != fences[0]:
		t.Errorf("epoch key %v, fences %v; want the readers' fence as the epoch's mod revision, on no etcd lease", e, fences)
	}
	// Renewals and releases are of either kind, whatever Shared says.
	flip := func(r driver.Request) driver.Request { r.Shared = !r.Shared; return r }
	other := newStore(t, cli, s.Prefix())
	if errs := other.RenewMany(ctx, []driver.Request{r1, w, flip(r2), flip(w)}); errs[0] != nil || errs[1] != nil || errs[2] != nil || errs[3] != nil {
		t.Errorf("another store's RenewMany of readers and a writer: %v", errs)
	}
	for _, r := range []driver.Request{flip(r1), r2} {
		if err := s.Release(ctx, r); err != nil {
			t.Fatalf("Release of %s (shared %v): %v", r.Holder, r.Shared, err)
		}
	}
	if err := s.Release(ctx, r2); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("a second Release of r2 = %v, want ErrNotHeld", err)
	}
	if ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(k1.Lease), clientv3.WithAttachedKeys()); err != nil || ttl.TTL <= 0 || len(ttl.Keys) != 0 {
		t.Errorf("a reader's etcd lease after its Release: %+v, %v; want alive and carrying nothing (a spare)", ttl, err)
	}
	if get("k\x00e/") == nil {
		t.Errorf("the epoch's key is gone before a writer's grant")
	}
	g, err := s.Acquire(ctx, req("k", "w2", false))
	if err != nil || g.Fence <= fences[0] || get("k\x00e/") != nil {
		t.Errorf("writer after the readers: %+v, %v, epoch key %v; want a larger fence and the epoch's key deleted", g, err, get("k\x00e/"))
	}
}

// TestBatchSharesLease: the keys of one batch that share a TTL share one
// etcd lease, which one keep-alive renews; it becomes a spare only once
// the last of them is released. A failed Release of one leaves its key to
// the next RenewMany, which deletes it. Break revokes the lease: the
// evicted key's neighbours in the batch are gone too.
func TestBatchSharesLease(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	prefix := testPrefix()
	s := newStore(t, cli, prefix)
	leaseOf := func(k string) int64 {
		t.Helper()
		resp, err := cli.Get(ctx, prefix+k)
		if err != nil || len(resp.Kvs) == 0 {
			return 0
		}
		return resp.Kvs[0].Lease
	}
	attached := func(id int64) int {
		t.Helper()
		ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(id), clientv3.WithAttachedKeys())
		if err != nil || ttl.TTL <= 0 {
			return -1
		}
		return len(ttl.Keys)
	}
	req := func(key string, ttl time.Duration) driver.Request {
		return driver.Request{Key: key, Token: randHex(16), Holder: "h", TTL: ttl}
	}
	rs := []driver.Request{req("a", 3*time.Second), req("b", 3*time.Second), req("c", 4*time.Second), req("d", 3*time.Second)}
	if _, errs := s.AcquireMany(ctx, rs); errors.Join(errs...) != nil {
		t.Fatalf("AcquireMany: %v", errs)
	}
	la, lc := leaseOf("a"), leaseOf("c")
	if la == 0 || leaseOf("b") != la || leaseOf("d") != la || lc == la || attached(la) != 3 || attached(lc) != 1 {
		t.Fatalf("leases a %x, b %x, c %x, d %x (a's carries %d keys); want a, b, d on one lease of 3 keys, c apart",
			la, leaseOf("b"), lc, leaseOf("d"), attached(la))
	}
	if errs := s.RenewMany(ctx, rs); errors.Join(errs...) != nil {
		t.Fatalf("RenewMany: %v", errs)
	}

	// A Release whose transaction fails leaves its key on the shared lease;
	// the next RenewMany deletes it.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Release(gone, rs[1]); err == nil {
		t.Fatal("Release with a cancelled context succeeded")
	}
	if leaseOf("b") != la {
		t.Fatalf("b after a failed Release is on %x, want still on %x", leaseOf("b"), la)
	}
	if errs := s.RenewMany(ctx, []driver.Request{rs[0], rs[2]}); errors.Join(errs...) != nil {
		t.Fatalf("RenewMany: %v", errs)
	}
	if leaseOf("b") != 0 || attached(la) != 2 {
		t.Errorf("after RenewMany: b on %x, the shared lease carries %d keys; want b deleted, 2 keys", leaseOf("b"), attached(la))
	}
	if err := s.Release(ctx, rs[0]); err != nil {
		t.Fatalf("Release(a): %v", err)
	}
	if n := attached(la); n != 1 {
		t.Errorf("after Release(a) the shared lease carries %d keys, want d's alone", n)
	}

	// Break revokes d's etcd lease: d is broken, and a key granted with it
	// in one batch is lost too (its renewal: ErrNotHeld).
	rs2 := []driver.Request{req("e", 3*time.Second), req("f", 3*time.Second)}
	if _, errs := s.AcquireMany(ctx, rs2); errors.Join(errs...) != nil {
		t.Fatalf("AcquireMany: %v", errs)
	}
	if le := leaseOf("e"); le == 0 || le != leaseOf("f") || le == la {
		t.Fatalf("e on %x, f on %x; want one lease, not d's %x (which still carries d)", le, leaseOf("f"), la)
	}
	if _, err := newStore(t, cli, prefix).Break(ctx, "e"); err != nil {
		t.Fatalf("Break: %v", err)
	}
	errs := s.RenewMany(ctx, append(rs2, rs[3]))
	if !errors.Is(errs[0], lease.ErrBroken) || errors.Is(errs[1], lease.ErrBroken) || !errors.Is(errs[1], lease.ErrNotHeld) || errs[2] != nil {
		t.Errorf("RenewMany after Break(e) = %v; want ErrBroken for e, ErrNotHeld for f, nil for d", errs)
	}
	if leaseOf("f") != 0 {
		t.Errorf("f is still there after Break(e) revoked its lease")
	}
}
