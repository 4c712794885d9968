// Loss subtests of the conformance suite: a lease whose token the store no
// longer holds, and a holder whose renewals stall, are reported lost (before
// anyone else can take the key over).

package leasetest

import (
	"errors"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// wantLost checks that l is lost (Err matches ErrLost, Context cancelled)
// and that the observer saw an EventLost for l with the reason given.
func (e *env) wantLost(l *lease.Lease, rec *Recorder, reason lease.LossReason) {
	e.t.Helper()
	if err := l.Err(); !errors.Is(err, lease.ErrLost) {
		e.t.Errorf("Err() = %v, want one matching ErrLost", err)
	}
	if l.Context().Err() == nil {
		e.t.Errorf("the lease's Context is not cancelled after the loss")
	}
	ev, _, ok := rec.Find(0, time.Second, Kind(l.Key(), lease.EventLost))
	if !ok {
		e.t.Errorf("the observer saw no EventLost for %q", l.Key())
		return
	}
	if ev.Reason != reason {
		e.t.Errorf("EventLost.Reason = %q, want %q (event error: %v)", ev.Reason, reason, ev.Err)
	}
	if ev.Fence != l.Fence() {
		e.t.Errorf("EventLost.Fence = %d, want %d", ev.Fence, l.Fence())
	}
}

// testLossNotHeld: when the store no longer holds the lease's token, the
// next renewal reports the lease lost, and its late Release leaves the next
// holder alone.
func testLossNotHeld(e *env) {
	rec := &Recorder{}
	c1 := e.client(e.store(), lease.WithObserver(rec))
	c2 := e.client(e.store())
	direct := e.store()
	key := e.key("notheld")
	l := e.tryAcquire(c1, key)
	// Take the lease away behind the client's back, as an expiry or takeover would.
	if err := direct.Release(e.ctx, driver.Request{Key: key, Token: l.Token()}); err != nil {
		e.t.Fatalf("releasing the client's token directly in the store: %v", err)
	}
	renew := e.ttl / 3 // the default renew interval
	bound := 2*renew + e.ttl
	start := time.Now()
	if !e.waitClosed(l.Done(), bound) {
		e.t.Fatalf("the lease was not reported lost within %v of its token being removed (Err() = %v)", bound, l.Err())
	}
	e.t.Logf("lost %v after the token was removed", time.Since(start).Round(time.Millisecond))
	e.wantLost(l, rec, lease.LossNotHeld)

	l2 := e.tryAcquire(c2, key)
	if l2.Fence() <= l.Fence() {
		e.t.Errorf("new holder's fence %d, want > %d", l2.Fence(), l.Fence())
	}
	if err := l.Release(e.ctx); !errors.Is(err, lease.ErrLost) {
		e.t.Errorf("Release of the lost lease: %v, want ErrLost", err)
	}
	if info := e.inspect(direct, key); !info.Held || info.Fence != l2.Fence() {
		e.t.Errorf("after the lost lease's Release: Inspect = %+v, want held by the new holder with fence %d", info, l2.Fence())
	}
	if err := l2.Err(); err != nil {
		e.t.Errorf("new holder's Err() = %v, want nil", err)
	}
}

// testLossBeforeTakeover: a holder whose renewals stall (a frozen process, a
// partition) reports the lease lost no later than another client can acquire
// the key.
func testLossBeforeTakeover(e *env) {
	rec := &Recorder{}
	fs := e.faulty()
	c1 := e.client(fs, lease.WithObserver(rec))
	c2 := e.client(e.store())
	key := e.key("stall")
	l := e.tryAcquire(c1, key)
	// Let one heartbeat through, then stall every renewal.
	if _, _, ok := rec.Find(0, 2*e.ttl, Kind(key, lease.EventRenewed)); !ok {
		e.t.Fatalf("no renewal within 2 TTLs (renewals seen by the store: %d)", fs.Renewals())
	}
	fs.BlockRenewals(true)
	blocked := time.Now()

	var lostAt time.Time
	lostSeen := make(chan struct{})
	go func() {
		select {
		case <-l.Done():
			lostAt = time.Now()
		case <-e.ctx.Done():
		}
		close(lostSeen)
	}()

	bound := e.ttl + e.ttl/2 + time.Second
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var l2 *lease.Lease
	for l2 == nil {
		got, err := c2.TryAcquire(e.ctx, key)
		switch {
		case err == nil:
			l2 = got
			continue
		case !errors.Is(err, lease.ErrHeld):
			e.t.Fatalf("TryAcquire while the holder stalls: %v", err)
		case time.Since(blocked) > bound:
			e.t.Fatalf("the stalled holder's key was not free within %v (lease Err() = %v)", bound, l.Err())
		}
		select {
		case <-tick.C:
		case <-e.ctx.Done():
			e.t.Fatalf("subtest deadline: %v", e.ctx.Err())
		}
	}
	takeover := time.Since(blocked)
	if !closed(l.Done()) {
		e.t.Errorf("another client acquired the key %v after renewals stalled while the stalled lease was not yet reported lost", takeover.Round(time.Millisecond))
		if !e.waitClosed(l.Done(), bound) {
			e.t.Fatalf("the stalled lease was not reported lost within %v", bound)
		}
	}
	<-lostSeen
	e.t.Logf("renewals stalled; lost after %v, taken over after %v", lostAt.Sub(blocked).Round(time.Millisecond), takeover.Round(time.Millisecond))
	if d := lostAt.Sub(blocked); d > bound {
		e.t.Errorf("lost %v after renewals stalled, want within %v", d, bound)
	}
	e.wantLost(l, rec, lease.LossDeadline)
	if l2.Fence() <= l.Fence() {
		e.t.Errorf("new holder's fence %d, want > %d", l2.Fence(), l.Fence())
	}
	if err := l.Release(e.ctx); !errors.Is(err, lease.ErrLost) {
		e.t.Errorf("Release of the lost lease: %v, want ErrLost", err)
	}
	if info := e.inspect(fs, key); !info.Held || info.Fence != l2.Fence() {
		e.t.Errorf("after the lost lease's Release: Inspect = %+v, want held by the new holder with fence %d", info, l2.Fence())
	}
}
