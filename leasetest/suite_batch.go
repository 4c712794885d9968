// Batched acquisitions and releases: the driver.BatchAcquirer and
// driver.BatchReleaser contract per request, and the Client coalescing its
// goroutines' calls over them.

package leasetest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// batchCases lists the batch subtests in the order they run.
var batchCases = []struct {
	name string
	fn   func(e *env)
}{
	{"AcquireMany", testAcquireMany},
	{"ReleaseMany", testReleaseMany},
	{"CoalescedOps", testCoalescedOps},
}

// batchAcquirer returns s as a driver.BatchAcquirer, or skips the subtest.
func (e *env) batchAcquirer(s driver.Store) driver.BatchAcquirer {
	e.t.Helper()
	ba, ok := s.(driver.BatchAcquirer)
	if !ok {
		e.t.Skipf("lacks capability driver.BatchAcquirer: %T acquires one key per call", s)
	}
	return ba
}

// testAcquireMany: each request of a batch gets Acquire's result for it
// alone, in order: free keys are granted, a held key is refused with its
// holder, a key the backend cannot take fails only itself; a retry with the
// same tokens is idempotent and fences strictly increase.
func testAcquireMany(e *env) {
	s, other := e.store(), e.store()
	ba := e.batchAcquirer(s)
	held, _ := e.storeAcquire(other, e.key("held"), "other", e.longTTL(s))
	heldFence := e.inspect(other, held.Key).Fence
	ttl := e.longTTL(s)
	free1, free2 := e.request(e.key("free1"), "a", ttl), e.request(e.key("free2"), "a", ttl)
	refused := e.request(held.Key, "a", ttl)
	bad := e.request("bad\x00key-"+randHex(4), "a", ttl) // no Client sends it: the backend may refuse it
	rs := []driver.Request{free1, refused, bad, free2}
	gs, errs := ba.AcquireMany(e.ctx, rs)
	if len(gs) != len(rs) || len(errs) != len(rs) {
		e.t.Fatalf("AcquireMany of %d requests: %d grants, %d errors", len(rs), len(gs), len(errs))
	}
	for _, i := range []int{0, 3} {
		if errs[i] != nil || gs[i].Fence == 0 {
			e.t.Fatalf("AcquireMany, free key %q (request %d): %+v, %v; want a grant", rs[i].Key, i, gs[i], errs[i])
		}
	}
	e.wantHeld(errs[1], held.Key, "other", heldFence)
	if errs[2] == nil {
		e.t.Logf("the store took the key with a NUL byte (fence %d)", gs[2].Fence)
		if err := s.Release(e.ctx, bad); err != nil {
			e.t.Errorf("Release of the key with a NUL byte it granted: %v", err)
		}
	} else {
		e.t.Logf("the key with a NUL byte: %v", errs[2])
	}
	for _, i := range []int{0, 3} {
		if info := e.inspect(other, rs[i].Key); !info.Held || info.Fence != gs[i].Fence {
			e.t.Errorf("after AcquireMany: Inspect(%q) = %+v, want held with fence %d", rs[i].Key, info, gs[i].Fence)
		}
	}
	if info := e.inspect(s, held.Key); !info.Held || info.Fence != heldFence || info.Holder != "" && info.Holder != "other" {
		e.t.Errorf("the held key after AcquireMany: Inspect = %+v, want still held by other with fence %d", info, heldFence)
	}

	// A retried batch (the same tokens) is idempotent: the same fences.
	again, errs := ba.AcquireMany(e.ctx, []driver.Request{free2, free1})
	if len(again) != 2 || len(errs) != 2 {
		e.t.Fatalf("AcquireMany of 2 requests: %d grants, %d errors", len(again), len(errs))
	}
	if errs[0] != nil || errs[1] != nil || again[0].Fence != gs[3].Fence || again[1].Fence != gs[0].Fence {
		e.t.Errorf("AcquireMany retried with the same tokens = %+v, %v; want fences [%d %d]", again, errs, gs[3].Fence, gs[0].Fence)
	}

	// Released and taken again by new tokens, in one batch with the key
	// still held: new, larger fences.
	for _, r := range []driver.Request{free1, free2} {
		if err := s.Release(e.ctx, r); err != nil {
			e.t.Fatalf("Release(%q): %v", r.Key, err)
		}
	}
	next1, next2 := e.request(free1.Key, "b", ttl), e.request(free2.Key, "b", ttl)
	gs2, errs := ba.AcquireMany(e.ctx, []driver.Request{next2, e.request(held.Key, "b", ttl), next1})
	if len(gs2) != 3 || len(errs) != 3 {
		e.t.Fatalf("AcquireMany of 3 requests: %d grants, %d errors", len(gs2), len(errs))
	}
	if errs[0] != nil || errs[2] != nil {
		e.t.Fatalf("AcquireMany of released keys: %v, %v", errs[0], errs[2])
	}
	e.wantHeld(errs[1], held.Key, "other", heldFence)
	if gs2[2].Fence <= gs[0].Fence || gs2[0].Fence <= gs[3].Fence {
		e.t.Errorf("fences after release: %d (was %d), %d (was %d); want strictly larger", gs2[2].Fence, gs[0].Fence, gs2[0].Fence, gs[3].Fence)
	}
	// An empty batch is no error.
	if gs, errs := ba.AcquireMany(e.ctx, nil); len(gs) != 0 || len(errs) != 0 {
		e.t.Errorf("AcquireMany(nil) = %v, %v; want nothing", gs, errs)
	}
}

// testReleaseMany: each request of a batch gets Release's result for it
// alone, in order: own tokens are released, a foreign or unknown token is
// refused with ErrNotHeld and its key is left as it was.
func testReleaseMany(e *env) {
	s, other := e.store(), e.store()
	br, ok := s.(driver.BatchReleaser)
	if !ok {
		e.t.Skipf("lacks capability driver.BatchReleaser: %T releases one key per call", s)
	}
	ttl := e.longTTL(s)
	a, _ := e.storeAcquire(s, e.key("a"), "a", ttl)
	b, _ := e.storeAcquire(s, e.key("b"), "a", ttl)
	c, gc := e.storeAcquire(other, e.key("c"), "other", ttl)
	foreign := e.request(c.Key, "a", ttl)
	unknown := e.request(e.key("never"), "a", ttl)
	rs := []driver.Request{a, foreign, b, unknown}
	errs := br.ReleaseMany(e.ctx, rs)
	if len(errs) != len(rs) {
		e.t.Fatalf("ReleaseMany of %d requests: %d errors", len(rs), len(errs))
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			e.t.Errorf("ReleaseMany, own token of %q (request %d): %v", rs[i].Key, i, errs[i])
		}
		if info := e.inspect(other, rs[i].Key); info.Held {
			e.t.Errorf("after ReleaseMany: Inspect(%q) = %+v, want free", rs[i].Key, info)
		}
	}
	e.wantNotHeld(errs[1], "ReleaseMany, a foreign token")
	e.wantNotHeld(errs[3], "ReleaseMany, a key never acquired")
	if info := e.inspect(s, c.Key); !info.Held || info.Fence != gc.Fence {
		e.t.Errorf("the foreign key after ReleaseMany: Inspect = %+v, want still held with fence %d", info, gc.Fence)
	}
	// Released tokens are gone: a second batch is refused per request.
	errs = br.ReleaseMany(e.ctx, []driver.Request{b, c, a})
	if len(errs) != 3 {
		e.t.Fatalf("ReleaseMany of 3 requests: %d errors", len(errs))
	}
	e.wantNotHeld(errs[0], "ReleaseMany again")
	e.wantNotHeld(errs[2], "ReleaseMany again")
	if errs[1] != nil {
		e.t.Errorf("ReleaseMany of the other store's own token: %v", errs[1])
	}
	if info := e.inspect(s, c.Key); info.Held {
		e.t.Errorf("after its holder's ReleaseMany: Inspect(%q) = %+v, want free", c.Key, info)
	}
	if errs := br.ReleaseMany(e.ctx, nil); len(errs) != 0 {
		e.t.Errorf("ReleaseMany(nil) = %v; want nothing", errs)
	}
}

// testCoalescedOps: goroutines of one Client that acquire and release
// different keys at the same moment all get their own results, and the
// store sees fewer calls than operations.
func testCoalescedOps(e *env) {
	inner := e.store()
	e.batchAcquirer(inner)
	_, releases := inner.(driver.BatchReleaser)
	// Each call takes at least a round trip's time, so that goroutines
	// starting together find one in flight.
	s := &countingStore{Store: inner, latency: 20 * time.Millisecond}
	other := e.store()
	c := e.client(s, lease.WithTTL(e.heartbeatTTL(inner)))
	const n, taken = 64, 8
	keys := make([]string, n)
	heldFence := map[string]uint64{}
	for i := range keys {
		keys[i] = e.key("many")
		if i%(n/taken) == 0 { // held by another process: refused, alone
			_, g := e.storeAcquire(other, keys[i], "other", e.longTTL(inner))
			heldFence[keys[i]] = g.Fence
		}
	}
	ls := make([]*lease.Lease, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			<-start
			ls[i], errs[i] = c.TryAcquire(e.ctx, keys[i])
		})
	}
	close(start)
	wg.Wait()
	tokens := map[string]string{}
	for i, key := range keys {
		if f, ok := heldFence[key]; ok {
			e.wantHeld(errs[i], key, "other", f)
			continue
		}
		if errs[i] != nil {
			e.t.Fatalf("TryAcquire(%q) among %d at once: %v", key, n, errs[i])
		}
		if ls[i].Key() != key {
			e.t.Errorf("TryAcquire(%q) returned the lease of %q", key, ls[i].Key())
		}
		if info := e.inspect(other, key); !info.Held || info.Fence != ls[i].Fence() {
			e.t.Errorf("Inspect(%q) = %+v, want held with fence %d", key, info, ls[i].Fence())
		}
		if k, dup := tokens[ls[i].Token()]; dup {
			e.t.Errorf("the leases of %q and %q have one token", k, key)
		}
		tokens[ls[i].Token()] = key
	}
	ops, calls := s.acquires.Load(), s.acquireCalls.Load()
	e.t.Logf("%d acquisitions in %d store calls", ops, calls)
	if ops != n {
		e.t.Errorf("the store saw %d acquisitions, want %d", ops, n)
	}
	if calls >= ops {
		e.t.Errorf("%d acquisitions in %d store calls: the store is a driver.BatchAcquirer, want fewer calls than acquisitions", ops, calls)
	}

	start = make(chan struct{})
	relErrs := make([]error, n)
	for i := range ls {
		if ls[i] == nil {
			continue
		}
		wg.Go(func() {
			<-start
			relErrs[i] = ls[i].Release(e.ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, l := range ls {
		if l == nil {
			continue
		}
		if relErrs[i] != nil {
			e.t.Errorf("Release(%q) among many at once: %v", l.Key(), relErrs[i])
		}
		if info := e.inspect(other, l.Key()); info.Held {
			e.t.Errorf("after Release: Inspect(%q) = %+v, want free", l.Key(), info)
		}
	}
	rops, rcalls := s.releases.Load(), s.releaseCalls.Load()
	e.t.Logf("%d releases in %d store calls", rops, rcalls)
	if want := int64(n - taken); rops != want {
		e.t.Errorf("the store saw %d releases, want %d", rops, want)
	}
	if releases && rcalls >= rops {
		e.t.Errorf("%d releases in %d store calls: the store is a driver.BatchReleaser, want fewer calls than releases", rops, rcalls)
	}
}

// countingStore counts the acquisitions and releases it forwards, and the
// calls that carry them; each call takes at least latency.
type countingStore struct {
	driver.Store
	latency time.Duration

	acquires, acquireCalls atomic.Int64
	releases, releaseCalls atomic.Int64
}

func (s *countingStore) delay(ctx context.Context) {
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (s *countingStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	s.acquires.Add(1)
	s.acquireCalls.Add(1)
	s.delay(ctx)
	return s.Store.Acquire(ctx, r)
}

// AcquireMany forwards to the inner store's AcquireMany.
func (s *countingStore) AcquireMany(ctx context.Context, rs []driver.Request) ([]driver.Grant, []error) {
	s.acquires.Add(int64(len(rs)))
	s.acquireCalls.Add(1)
	s.delay(ctx)
	return s.Store.(driver.BatchAcquirer).AcquireMany(ctx, rs)
}

func (s *countingStore) Release(ctx context.Context, r driver.Request) error {
	s.releases.Add(1)
	s.releaseCalls.Add(1)
	s.delay(ctx)
	return s.Store.Release(ctx, r)
}

// ReleaseMany forwards to the inner store's ReleaseMany, or releases one
// by one (as many calls) when it has none.
func (s *countingStore) ReleaseMany(ctx context.Context, rs []driver.Request) []error {
	s.delay(ctx)
	br, ok := s.Store.(driver.BatchReleaser)
	if !ok {
		errs := make([]error, len(rs))
		for i, r := range rs {
			s.releases.Add(1)
			s.releaseCalls.Add(1)
			errs[i] = s.Store.Release(ctx, r)
		}
		return errs
	}
	s.releases.Add(int64(len(rs)))
	s.releaseCalls.Add(1)
	return br.ReleaseMany(ctx, rs)
}

// RenewMany forwards to the inner store's RenewMany, or renews one by one.
func (s *countingStore) RenewMany(ctx context.Context, rs []driver.Request) []error {
	if br, ok := s.Store.(driver.BatchRenewer); ok {
		return br.RenewMany(ctx, rs)
	}
	errs := make([]error, len(rs))
	for i, r := range rs {
		errs[i] = s.Store.Renew(ctx, r)
	}
	return errs
}

var (
	_ driver.BatchAcquirer = (*countingStore)(nil)
	_ driver.BatchReleaser = (*countingStore)(nil)
	_ driver.BatchRenewer  = (*countingStore)(nil)
)
