// Semaphore subtests of the conformance suite: never more than n holders
// under a race of many goroutines over several clients, per-slot fences, and
// a waiter woken when a slot is released.

package leasetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// testSemaphoreLimit: goroutines of several clients race for a semaphore of
// n, with TrySemaphore and AcquireSemaphore; never more than n hold it at
// once, n do at some point, and each slot's fences increase. The race runs
// for at least 1.5 TTL and until n held at once (liveness, bounded generously
// so a busy machine only makes it longer). A holder counts until it lets go
// or its lease's local deadline passes: a machine loaded enough to starve a
// heartbeat for a TTL loses the lease (logged, and its Release then reports
// ErrLost), and the store may then grant the slot to another.
func testSemaphoreLimit(e *env) {
	const n, clients, perClient = 3, 3, 4
	cs := make([]*lease.Client, clients)
	for i := range cs {
		cs[i] = e.client(e.store())
	}
	key := e.key("sem")
	var wins atomic.Int64
	var mu sync.Mutex
	holders := make(map[*lease.Lease]struct{}) // the holds not let go yet
	peak, losses := 0, 0
	fences := make(map[string][]uint64) // per slot key, in acquisition order
	hold := func(l *lease.Lease) {
		mu.Lock()
		live := 1
		for h := range holders {
			if h.Remaining() > 0 {
				live++
			}
		}
		holders[l] = struct{}{}
		peak = max(peak, live)
		if live > n {
			e.t.Errorf("%d holders of a semaphore of %d", live, n)
		}
		fences[l.Key()] = append(fences[l.Key()], l.Fence())
		mu.Unlock()
		wins.Add(1)
		time.Sleep(e.ttl / 20)
		mu.Lock()
		delete(holders, l) // before the release: the count never undercounts
		mu.Unlock()
		switch err := l.Release(e.ctx); {
		case errors.Is(err, lease.ErrLost):
			mu.Lock()
			losses++
			mu.Unlock()
			e.t.Logf("a slot's lease was lost while held (a starved heartbeat): %v", err)
		case err != nil:
			e.t.Errorf("Release of a slot: %v", err)
		}
	}
	peakNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
	begin := time.Now()
	stop, giveUp := begin.Add(e.ttl+e.ttl/2), begin.Add(15*time.Second+10*e.ttl)
	done := func() bool {
		now := time.Now()
		return e.ctx.Err() != nil || now.After(giveUp) || now.After(stop) && peakNow() >= n
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for ci, c := range cs {
		for g := range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for !done() {
					var l *lease.Lease
					var err error
					if (ci+g)%2 == 0 {
						l, err = c.TrySemaphore(e.ctx, key, n)
					} else {
						ctx, cancel := context.WithTimeout(e.ctx, e.ttl/2)
						l, err = c.AcquireSemaphore(ctx, key, n)
						cancel()
					}
					switch {
					case err == nil:
						hold(l)
					case errors.Is(err, lease.ErrHeld), errors.Is(err, context.DeadlineExceeded):
						time.Sleep(e.ttl / 50)
					default:
						e.t.Errorf("semaphore acquire in the race: %v", err)
						return
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	e.t.Logf("%d acquisitions by %d goroutines of %d clients in %v; peak %d holders; %d lost", wins.Load(), clients*perClient, clients, time.Since(begin).Round(time.Millisecond), peak, losses)
	if peak != n {
		e.t.Errorf("peak of %d concurrent holders, want exactly n = %d", peak, n)
	}
	if int64(losses) > wins.Load()/4 {
		e.t.Errorf("%d of %d holds lost: heartbeats fail even without load", losses, wins.Load())
	}
	for slot, fs := range fences {
		for i := 1; i < len(fs); i++ {
			if fs[i] <= fs[i-1] {
				e.t.Errorf("slot %q: fence %d after %d, want increasing", slot, fs[i], fs[i-1])
			}
		}
	}
	if len(fences) != n {
		e.t.Errorf("slots used: %d, want %d", len(fences), n)
	}
}

// testSemaphoreWake: with every slot held, TrySemaphore reports ErrHeld,
// a different n is refused, and a waiter acquires the slot a holder releases
// (promptly when the store announces releases).
func testSemaphoreWake(e *env) {
	const n = 2
	c1, c2, c3 := e.client(e.store()), e.client(e.store()), e.client(e.store())
	key := e.key("semwake")
	long := lease.WithTTL(4 * e.ttl)
	l1, err := c1.TrySemaphore(e.ctx, key, n, long)
	if err != nil {
		e.t.Fatalf("TrySemaphore: %v", err)
	}
	l2, err := c2.TrySemaphore(e.ctx, key, n, long)
	if err != nil {
		e.t.Fatalf("TrySemaphore of the second slot: %v", err)
	}
	if l1.Key() == l2.Key() {
		e.t.Fatalf("two holders of slot %q", l1.Key())
	}
	if h := l1.Holder(); h == "" || h != c1.Holder() {
		e.t.Errorf("slot lease Holder() = %q, want the client's %q (without annotation)", h, c1.Holder())
	}
	if l, err := c3.TrySemaphore(e.ctx, key, n); !errors.Is(err, lease.ErrHeld) {
		e.t.Errorf("TrySemaphore with every slot held: %v, %v; want ErrHeld", l, err)
	}
	if l, err := c3.TrySemaphore(e.ctx, key, 1); !errors.Is(err, lease.ErrInvalid) {
		e.t.Errorf("TrySemaphore with n=1 on a semaphore held with n=%d: %v, %v; want ErrInvalid", n, l, err)
	}
	if l, err := c3.TrySemaphore(e.ctx, key, 0); !errors.Is(err, lease.ErrInvalid) {
		e.t.Errorf("TrySemaphore with n=0: %v, %v; want ErrInvalid", l, err)
	}

	ch := make(chan acquired, 1)
	go func() {
		l, err := c3.AcquireSemaphore(e.ctx, key, n)
		ch <- acquired{l, err, time.Now()}
	}()
	e.sleep(e.ttl / 2)
	select {
	case r := <-ch:
		e.t.Fatalf("AcquireSemaphore returned while every slot was held: %v, %v", r.l, r.err)
	default:
	}
	released := time.Now()
	if err := l2.Release(e.ctx); err != nil {
		e.t.Fatalf("Release: %v", err)
	}
	_, notifier := e.store().(driver.Notifier)
	bound := 4*e.ttl + e.ttl + time.Second
	if notifier {
		bound = e.ttl
	}
	r := e.await(ch, bound+time.Second)
	if r.err != nil {
		e.t.Fatalf("AcquireSemaphore: %v", r.err)
	}
	wait := r.at.Sub(released)
	e.t.Logf("waiter acquired %v after a release (store is a Notifier: %v)", wait.Round(time.Millisecond), notifier)
	if wait > bound {
		e.t.Errorf("waiter acquired %v after the release, want within %v", wait, bound)
	}
	if r.l.Key() != l2.Key() || r.l.Fence() <= l2.Fence() {
		e.t.Errorf("waiter got slot %q fence %d, want the released slot %q with a fence > %d", r.l.Key(), r.l.Fence(), l2.Key(), l2.Fence())
	}
	if err := l1.Err(); err != nil {
		e.t.Errorf("other holder's Err() = %v, want nil", err)
	}
}
