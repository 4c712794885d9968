// Store-level subtests of the conformance suite: the driver.Store contract
// (renewal, expiry, foreign tokens, idempotent acquire) without a Client.

package leasetest

import (
	"errors"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// testStoreRenewExtends: Renew pushes the expiry to TTL from the renewal.
func testStoreRenewExtends(e *env) {
	s, other := e.store(), e.store()
	// A round is conclusive only if its checks ran when they meant to: on a
	// busy machine a late sleep can pass the renewed expiry too, and the
	// round is then run again rather than failed.
	for round := 1; ; round++ {
		key := e.key("renew")
		start := time.Now()
		r, g := e.storeAcquire(s, key, "a", e.ttl)
		e.sleep(e.ttl / 2)
		renewed := time.Now()
		if err := s.Renew(e.ctx, r); err != nil {
			if time.Since(start) > e.ttl*9/10 && round < 5 {
				e.t.Logf("round %d: Renew sent %v after the acquire, too late to judge: again", round, renewed.Sub(start))
				continue
			}
			e.t.Fatalf("Renew: %v", err)
		}
		info := e.inspect(s, key)
		late := time.Since(renewed) > e.ttl*3/10
		if !late && (!info.Held || info.Fence != g.Fence) {
			e.t.Fatalf("after Renew: Inspect = %+v, want held with fence %d", info, g.Fence)
		}
		if !late && info.Remaining != 0 && info.Remaining < e.ttl*6/10 {
			e.t.Errorf("after Renew: Remaining = %v, want > %v (60%% of the TTL)", info.Remaining, e.ttl*6/10)
		}
		// Past the original expiry (TTL after the acquire), before the renewed one.
		e.sleep(time.Until(start.Add(e.ttl + e.ttl/5)))
		info = e.inspect(other, key)
		_, err := other.Acquire(e.ctx, driver.Request{Key: key, Token: token(), Holder: "b", TTL: e.ttl})
		if late || time.Since(renewed) > e.ttl*9/10 {
			if round < 5 {
				e.t.Logf("round %d: the checks ran %v after the renewal, too late to judge: again", round, time.Since(renewed))
				continue
			}
			e.t.Fatalf("5 rounds in a row were too slow to judge the renewal (the machine is overloaded)")
		}
		if !info.Held || info.Fence != g.Fence {
			e.t.Errorf("after the original TTL: Inspect = %+v, want still held with fence %d", info, g.Fence)
		}
		e.wantHeld(err, key, "a", g.Fence)
		return
	}
}

// testStoreRenewAfterExpiry: an expired lease cannot be renewed or released.
func testStoreRenewAfterExpiry(e *env) {
	s := e.store()
	key := e.key("expired")
	r, _ := e.storeAcquire(s, key, "a", e.ttl)
	e.sleep(e.expiryWait())
	e.wantNotHeld(s.Renew(e.ctx, r), "Renew after expiry")
	e.wantNotHeld(s.Release(e.ctx, r), "Release after expiry")
	if info := e.inspect(s, key); info.Held {
		e.t.Errorf("after expiry: Inspect = %+v, want not held", info)
	}
}

// testStoreRenewAfterTakeover: once another token took the key over, the old
// token can neither renew nor release, and the new holder is intact.
func testStoreRenewAfterTakeover(e *env) {
	sa, sb := e.store(), e.store()
	key := e.key("takeover")
	ra, ga := e.storeAcquire(sa, key, "a", e.ttl)
	e.sleep(e.expiryWait())
	rb, gb := e.storeAcquire(sb, key, "b", 4*e.ttl)
	if gb.Fence <= ga.Fence {
		e.t.Errorf("new holder's fence %d, want > old holder's %d", gb.Fence, ga.Fence)
	}
	e.wantNotHeld(sa.Renew(e.ctx, ra), "old token's Renew after takeover")
	e.wantNotHeld(sa.Release(e.ctx, ra), "old token's Release after takeover")
	info := e.inspect(sa, key)
	if !info.Held || info.Fence != gb.Fence || (info.Holder != "" && info.Holder != "b") {
		e.t.Errorf("after the old token's attempts: Inspect = %+v, want held by %q with fence %d", info, "b", gb.Fence)
	}
	if err := sb.Renew(e.ctx, rb); err != nil {
		e.t.Errorf("new holder's Renew: %v", err)
	}
}

// testForeignRelease: a token that does not hold the key cannot release or
// renew it.
func testForeignRelease(e *env) {
	sa, sb := e.store(), e.store()
	key := e.key("foreign")
	ra, ga := e.storeAcquire(sa, key, "a", 4*e.ttl)
	foreign := driver.Request{Key: key, Token: token(), Holder: "b", TTL: e.ttl}
	e.wantNotHeld(sb.Release(e.ctx, foreign), "Release with a foreign token")
	e.wantNotHeld(sb.Renew(e.ctx, foreign), "Renew with a foreign token")
	never := driver.Request{Key: e.key("never-held"), Token: token(), Holder: "b", TTL: e.ttl}
	e.wantNotHeld(sb.Release(e.ctx, never), "Release of a key nobody holds")
	e.wantNotHeld(sb.Renew(e.ctx, never), "Renew of a key nobody holds")
	info := e.inspect(sb, key)
	if !info.Held || info.Fence != ga.Fence || (info.Holder != "" && info.Holder != "a") {
		e.t.Errorf("after the foreign Release: Inspect = %+v, want held by %q with fence %d", info, "a", ga.Fence)
	}
	if err := sa.Renew(e.ctx, ra); err != nil {
		e.t.Errorf("holder's Renew after the foreign Release: %v", err)
	}
	if err := sa.Release(e.ctx, ra); err != nil {
		e.t.Errorf("holder's Release: %v", err)
	}
}

// testExpiryFrees: a lease that is not renewed is free for others after its TTL.
func testExpiryFrees(e *env) {
	sa, sb := e.store(), e.store()
	key := e.key("expiry")
	_, ga := e.storeAcquire(sa, key, "a", e.ttl)
	rb := driver.Request{Key: key, Token: token(), Holder: "b", TTL: e.ttl}
	_, err := sb.Acquire(e.ctx, rb)
	e.wantHeld(err, key, "a", ga.Fence)
	var he *lease.HeldError
	if errors.As(err, &he) && he.Remaining > e.ttl {
		e.t.Errorf("HeldError.Remaining = %v, want <= TTL %v", he.Remaining, e.ttl)
	}
	e.sleep(e.expiryWait())
	gb, err := sb.Acquire(e.ctx, rb)
	if err != nil {
		e.t.Fatalf("Acquire after the holder's TTL ran out: %v", err)
	}
	if gb.Fence <= ga.Fence {
		e.t.Errorf("fence after expiry %d, want > %d", gb.Fence, ga.Fence)
	}
}

// testIdempotentAcquire: the holding token acquires again with the same
// fence, and that refreshes the TTL.
func testIdempotentAcquire(e *env) {
	s, other := e.store(), e.store()
	key := e.key("idem")
	r, g := e.storeAcquire(s, key, "a", e.ttl)
	e.sleep(e.ttl / 2)
	g2, err := s.Acquire(e.ctx, r)
	if err != nil {
		e.t.Fatalf("second Acquire with the same token: %v", err)
	}
	if g2.Fence != g.Fence {
		e.t.Errorf("second Acquire with the same token: fence %d, want the same %d", g2.Fence, g.Fence)
	}
	// The same token through another store of the namespace, as a retry after
	// a reconnect would do it.
	refreshed := time.Now() // the key expires no earlier than refreshed + TTL
	g3, err := other.Acquire(e.ctx, r)
	if err != nil {
		e.t.Fatalf("Acquire with the same token through another store: %v", err)
	}
	if g3.Fence != g.Fence {
		e.t.Errorf("Acquire with the same token through another store: fence %d, want %d", g3.Fence, g.Fence)
	}
	// The re-acquire refreshed the TTL: past the first expiry it still holds
	// (unless this goroutine was starved for the rest of the TTL).
	e.sleep(e.ttl/2 + e.ttl/5)
	info := e.inspect(other, key)
	err = s.Renew(e.ctx, r)
	if late := time.Since(refreshed); late >= e.ttl {
		e.t.Logf("starved: Inspect and Renew came %v after the re-acquire (TTL %v); not judged", late, e.ttl)
		return
	}
	if !info.Held || info.Fence != g.Fence {
		e.t.Errorf("after the first TTL: Inspect = %+v, want held with fence %d (re-acquire refreshes the TTL)", info, g.Fence)
	}
	if err != nil {
		e.t.Errorf("Renew after re-acquire: %v", err)
	}
}
