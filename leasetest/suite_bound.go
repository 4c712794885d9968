// Leases the caller bounds (Extend, WithManualRenew, WithMaxHold) and
// reentrant leases, through the store.

package leasetest

import (
	"errors"
	"sync"
	"time"

	"github.com/leasekit/lease"
)

// testExtendManual: Extend gives a lease the heartbeat does not renew a
// longer TTL in the store, which keeps it past its first TTL (a FixedTTL
// store refuses, and Renew keeps the lease instead); Renew then renews it.
func testExtendManual(e *env) {
	s := e.store()
	ext := e.longTTL(s)
	if ext < 3*e.ttl {
		e.t.Skipf("the store's MaxTTL %v leaves no room to extend a %v TTL", s.Caps().MaxTTL, e.ttl)
	}
	c, other := e.client(s), e.client(e.store())
	key := e.key("extend")
	l := e.tryAcquire(c, key, lease.WithManualRenew())
	err := l.Extend(e.ctx, ext)
	switch {
	case s.Caps().FixedTTL && (!errors.Is(err, errors.ErrUnsupported) || l.Err() != nil || l.TTL() != e.ttl):
		e.t.Fatalf("Extend on a FixedTTL store = %v (Err %v, TTL %v), want ErrUnsupported and the lease unchanged", err, l.Err(), l.TTL())
	case s.Caps().FixedTTL:
		ext = e.ttl
		for range 4 { // past the first TTL, renewed by hand
			e.sleep(e.ttl / 3)
			if err := l.Renew(e.ctx); err != nil {
				e.t.Fatalf("Renew: %v", err)
			}
		}
	case err != nil:
		e.t.Fatalf("Extend(%v): %v", ext, err)
	default:
		e.sleep(e.expiryWait()) // past the first TTL, with no renewal
	}
	_, err = other.TryAcquire(e.ctx, key)
	e.wantHeld(err, key, c.Holder(), l.Fence())
	if err := l.Renew(e.ctx); err != nil {
		e.t.Fatalf("Renew of the extended lease: %v", err)
	}
	if l.TTL() != ext || l.Remaining() < ext/2 {
		e.t.Errorf("after Renew: TTL %v, Remaining %v; want %v and most of it", l.TTL(), l.Remaining(), ext)
	}
	if err := l.Release(e.ctx); err != nil {
		e.t.Fatalf("Release: %v", err)
	}
}

// testMaxHold: WithMaxHold gives a healthy lease up and frees its key in the
// store long before its TTL would.
func testMaxHold(e *env) {
	s := e.store()
	rec := &Recorder{}
	c, other := e.client(s, lease.WithObserver(rec)), e.client(e.store())
	key := e.key("maxhold")
	l := e.tryAcquire(c, key, lease.WithTTL(e.longTTL(s)), lease.WithMaxHold(e.ttl))
	if !e.waitClosed(l.Done(), 10*e.ttl+5*time.Second) {
		e.t.Fatalf("the lease was not given up %v after its max hold %v", 10*e.ttl+5*time.Second, e.ttl)
	}
	e.wantLost(l, rec, lease.LossMaxHold)
	deadline := time.Now().Add(5 * time.Second)
	for {
		l2, err := other.TryAcquire(e.ctx, key)
		if err == nil {
			if l2.Fence() <= l.Fence() {
				e.t.Errorf("next fence %d, want more than %d", l2.Fence(), l.Fence())
			}
			return
		}
		if !errors.Is(err, lease.ErrHeld) || time.Now().After(deadline) {
			e.t.Fatalf("the key was not freed in the store after the give-up: %v", err)
		}
		e.sleep(20 * time.Millisecond)
	}
}

// testReentrant: a reentrant lease is one lease in the store, freed with
// its last hold.
func testReentrant(e *env) {
	s := e.store()
	c, other := e.client(s), e.client(e.store())
	key := e.key("reentrant")
	l := e.tryAcquire(c, key, lease.WithReentrant(true))
	if l2 := e.tryAcquire(c, key, lease.WithReentrant(true)); l2 != l {
		e.t.Fatalf("the second reentrant acquisition returned another lease")
	}
	if err := l.Release(e.ctx); err != nil {
		e.t.Fatalf("first Release: %v", err)
	}
	_, err := other.TryAcquire(e.ctx, key)
	e.wantHeld(err, key, c.Holder(), l.Fence())
	if err := l.Release(e.ctx); err != nil {
		e.t.Fatalf("last Release: %v", err)
	}
	if l3 := e.tryAcquire(other, key); l3.Fence() <= l.Fence() {
		e.t.Errorf("next fence %d, want more than %d", l3.Fence(), l.Fence())
	}
}

// testAcquireAll: clients asking for overlapping sets of keys in different
// orders all get them, never two at once, with fences that grow per key.
func testAcquireAll(e *env) {
	a, b, c := e.key("all-a"), e.key("all-b"), e.key("all-c")
	sets := [][]string{{a, b, c}, {c, b}, {b, a}}
	var mu sync.Mutex
	inUse, fences := map[string]bool{}, map[string]uint64{}
	var wg sync.WaitGroup
	for _, set := range sets {
		cl := e.client(e.store())
		wg.Go(func() {
			for range 5 {
				m, err := cl.AcquireAll(e.ctx, set...)
				if err != nil {
					e.t.Errorf("AcquireAll: %v", err)
					return
				}
				mu.Lock()
				for _, k := range set {
					if inUse[k] || m.Fence(k) <= fences[k] {
						e.t.Errorf("key %s: in use %v, fence %d after %d", k, inUse[k], m.Fence(k), fences[k])
					}
					inUse[k], fences[k] = true, m.Fence(k)
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				for _, k := range set {
					inUse[k] = false
				}
				mu.Unlock()
				if err := m.Release(e.ctx); err != nil {
					e.t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
}
