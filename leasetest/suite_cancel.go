// Conformance: waiters cancelled while their store call is in flight leave
// nothing behind.

package leasetest

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leasekit/lease"
)

// testCancelStorm: clients contend for one key with Acquire contexts that
// end after a random 0–3 ms, so that many end while the store call is in
// flight. After each storm (every call returned) a newcomer must get the
// key within a fraction of the TTL: an attempt that reached the store after
// its caller had left the queue (or released a grant it never saw) would
// keep the key reserved or held for a whole TTL.
func testCancelStorm(e *env) {
	const (
		clients = 6
		storms  = 3
		storm   = 400 * time.Millisecond
	)
	ttl := max(10*e.ttl, 5*time.Second) // a leftover would block for this long
	cs := make([]*lease.Client, clients)
	for i := range cs {
		s := e.store()
		if m := s.Caps().MaxTTL; m > 0 {
			ttl = min(ttl, m)
		}
		cs[i] = e.client(s, lease.WithTTL(ttl))
	}
	bound := min(ttl/3, 2*time.Second) // a newcomer waits at most this
	key := e.key("cancel-storm")
	newcomer := e.client(e.store(), lease.WithTTL(ttl))
	for round := range storms {
		sctx, stop := context.WithTimeout(e.ctx, storm)
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for sctx.Err() == nil {
					actx, cancel := context.WithTimeout(sctx, time.Duration(rand.IntN(3000))*time.Microsecond)
					l, err := c.Acquire(actx, key)
					cancel()
					if err != nil {
						continue
					}
					rctx, rcancel := context.WithTimeout(context.WithoutCancel(e.ctx), ttl)
					if err := l.Release(rctx); err != nil {
						e.t.Errorf("Release: %v", err)
					}
					rcancel()
				}
			}()
		}
		wg.Wait()
		stop()
		start := time.Now()
		actx, cancel := context.WithTimeout(e.ctx, bound)
		l, err := newcomer.Acquire(actx, key)
		cancel()
		if err != nil {
			e.t.Fatalf("storm %d: a newcomer could not acquire the key within %v after every waiter was cancelled (TTL %v): %v",
				round+1, bound, ttl, err)
		}
		e.t.Logf("storm %d: the newcomer acquired after %v", round+1, time.Since(start).Round(time.Millisecond))
		if err := l.Release(e.ctx); err != nil {
			e.t.Fatalf("the newcomer's Release: %v", err)
		}
	}
}
