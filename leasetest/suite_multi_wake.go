// AcquireAll under contention: every call ends, however the waiters meet.

package leasetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// testAcquireAllContended: clients asking again and again for 2 of 3 keys,
// in random orders, over stores slowed by a few milliseconds a call (as
// over a network with durable writes), all get their sets; none waits until
// its deadline. An AcquireAll that released its keys to wait for another
// and then tried them again livelocked here: every key kept a queue, so no
// try succeeded, while the keys went round from waiter to waiter.
func testAcquireAllContended(e *env) {
	const clients, pick, run, bound = 8, 2, 4 * time.Second, 10 * time.Second
	keys := []string{e.key("multi-a"), e.key("multi-b"), e.key("multi-c")}
	var mu sync.Mutex
	inUse, fences := map[string]bool{}, map[string]uint64{}
	done := 0
	stop := time.Now().Add(run)
	var wg sync.WaitGroup
	for i := range clients {
		s := e.store()
		ttl := max(e.heartbeatTTL(s), 5*time.Second) // the livelock showed more with longer waits
		if m := s.Caps().MaxTTL; m > 0 {
			ttl = min(ttl, m)
		}
		if i == 0 && !s.Caps().FIFO {
			e.t.Skip("the store keeps no queues: its waiters race, and are not bounded here")
		}
		c := e.client(slowStore{Store: s, d: 5 * time.Millisecond}, lease.WithTTL(ttl))
		wg.Go(func() {
			for time.Now().Before(stop) && e.ctx.Err() == nil {
				var set []string
				for _, i := range rand.Perm(len(keys))[:pick] {
					set = append(set, keys[i])
				}
				ctx, cancel := context.WithTimeout(e.ctx, bound)
				start := time.Now()
				m, err := c.AcquireAll(ctx, set...)
				cancel()
				if err != nil {
					e.t.Errorf("AcquireAll(%v) after %v: %v", set, time.Since(start).Round(time.Millisecond), err)
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
				done++
				mu.Unlock()
				if err := m.Release(e.ctx); err != nil {
					e.t.Errorf("Release: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if done < clients {
		e.t.Errorf("%d sets acquired by %d clients in %v, want at least one each", done, clients, run)
	}
}

// slowStore delays every Acquire and Release by d: a slower round trip.
type slowStore struct {
	driver.Store
	d time.Duration
}

var _ driver.Notifier = slowStore{}

func (s slowStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	time.Sleep(s.d)
	return s.Store.Acquire(ctx, r)
}

func (s slowStore) Release(ctx context.Context, r driver.Request) error {
	time.Sleep(s.d)
	return s.Store.Release(ctx, r)
}

// Subscribe forwards to the store's announcements, if it makes any.
func (s slowStore) Subscribe(ctx context.Context) (driver.Subscription, error) {
	n, ok := s.Store.(driver.Notifier)
	if !ok {
		return nil, fmt.Errorf("leasetest: %T announces no releases: %w", s.Store, errors.ErrUnsupported)
	}
	return n.Subscribe(ctx)
}
