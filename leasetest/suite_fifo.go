// Conformance: FIFO hand-off for stores that queue waiters (Caps.FIFO).

package leasetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// queuer skips the subtest unless s keeps a queue of waiters (Caps.FIFO).
func (e *env) queuer(s driver.Store) bool {
	e.t.Helper()
	if !s.Caps().FIFO {
		e.t.Skipf("lacks capability Caps.FIFO: %T does not queue waiters, FIFO hand-off is not promised", s)
	}
	return true
}

// queue asks s to acquire r with Request.Queue and checks that it is refused
// with ahead waiters queued before it (Queued).
func (e *env) queue(s driver.Store, r driver.Request, ahead int) {
	e.t.Helper()
	Queued(e.t, e.ctx, s, r, ahead)
}

// behind checks that r, queued, is refused with one token ahead, who's: the
// waiter whose turn it is, or already its holder (a store may grant the
// key to the first waiter when the holder releases it).
func (e *env) behind(s driver.Store, r driver.Request, who string) {
	e.t.Helper()
	r.Queue = true
	_, err := s.Acquire(e.ctx, r)
	var he *lease.HeldError
	switch {
	case !errors.As(err, &he):
		e.t.Fatalf("queued Acquire(%q) for %s = %v, want a *lease.HeldError", r.Key, r.Holder, err)
	case he.Queued+btoi(he.Holder == who) != 1 || he.Queued == 1 && he.Holder != "":
		e.t.Fatalf("queued Acquire(%q) for %s: Queued %d, Holder %q; want %s ahead, waiting or holding", r.Key, r.Holder, he.Queued, he.Holder, who)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// grant acquires r (with Request.Queue) and fails unless it is granted.
func (e *env) grant(s driver.Store, r driver.Request) driver.Grant {
	e.t.Helper()
	r.Queue = true
	g, err := e.acquireRetried(s, r)
	if err != nil {
		e.t.Fatalf("Acquire(%q) for %s, first in the queue: %v", r.Key, r.Holder, err)
	}
	if g.FromQueue { // as the Client does: record the grant at once
		if err := s.Renew(e.ctx, r); err != nil {
			e.t.Fatalf("Renew(%q) for %s after a FromQueue grant: %v", r.Key, r.Holder, err)
		}
	}
	return g
}

func (e *env) request(key, holder string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Token: token(), Holder: holder, TTL: ttl}
}

// testFIFOOrder: waiters get a freed key in arrival order; neither the
// releaser nor a newcomer can take it while waiters are queued.
func testFIFOOrder(e *env) {
	s1, s2 := e.store(), e.store()
	if !e.queuer(s1) {
		return
	}
	key, ttl := e.key("fifo"), 4*e.ttl
	a, ga := e.storeAcquire(s1, key, "A", ttl)
	b, c := e.request(key, "B", ttl), e.request(key, "C", ttl)
	e.queue(s2, b, 0)
	e.queue(s1, c, 1)
	e.queue(s2, b, 0) // a refresh keeps B's place
	if err := s1.Release(e.ctx, a); err != nil {
		e.t.Fatalf("A's Release: %v", err)
	}
	// Reserved for B (or B's): C (queued), a newcomer and the releaser wait.
	e.behind(s1, c, "B")
	if _, err := s2.Acquire(e.ctx, e.request(key, "newcomer", ttl)); !errors.Is(err, lease.ErrHeld) {
		e.t.Fatalf("a newcomer's Acquire while B is queued = %v, want ErrHeld", err)
	}
	again := e.request(key, "A again", ttl)
	if _, err := s1.Acquire(e.ctx, again); !errors.Is(err, lease.ErrHeld) {
		e.t.Fatalf("the releaser's Acquire while B is queued = %v, want ErrHeld", err)
	}
	gb := e.grant(s2, b)
	if gb.Fence <= ga.Fence {
		e.t.Errorf("B's fence %d is not above A's %d", gb.Fence, ga.Fence)
	}
	e.queue(s1, c, 0) // B left the queue when it acquired
	if err := s2.Release(e.ctx, b); err != nil {
		e.t.Fatalf("B's Release: %v", err)
	}
	gc := e.grant(s1, c)
	if gc.Fence <= gb.Fence {
		e.t.Errorf("C's fence %d is not above B's %d", gc.Fence, gb.Fence)
	}
	if err := s1.Release(e.ctx, c); err != nil {
		e.t.Fatalf("C's Release: %v", err)
	}
	// The queue is empty again: anyone may take the key.
	e.storeAcquire(s2, key, "newcomer", ttl)
}

// testFIFOWaiterExpires: a waiter that stops refreshing its entry leaves the
// queue after its TTL, so a dead waiter delays the others by at most a TTL.
func testFIFOWaiterExpires(e *env) {
	s := e.store()
	if !e.queuer(s) {
		return
	}
	long := 6 * e.ttl
	var key string
	var a, dead, c driver.Request
	for round := 1; ; round++ {
		key = e.key("fifo-expiry")
		a, _ = e.storeAcquire(s, key, "A", long)
		dead, c = e.request(key, "dead", e.ttl), e.request(key, "C", long)
		// A store may find the short entry expired before its own call
		// ended (a loaded ZooKeeper ensemble took over a TTL): try again.
		q := dead
		q.Queue = true
		if _, err := s.Acquire(e.ctx, q); errors.Is(err, lease.ErrNotHeld) && round < 5 {
			e.t.Logf("round %d: the dead waiter's entry expired during its own Acquire (%v): again", round, err)
			continue
		}
		break
	}
	e.queue(s, dead, 0)
	e.queue(s, c, 1)
	if err := s.Release(e.ctx, a); err != nil {
		e.t.Fatalf("A's Release: %v", err)
	}
	e.behind(s, c, "dead") // the dead waiter's entry is still live
	e.sleep(e.expiryWait())
	e.grant(s, c)
}

// testFIFOGiveUp: a waiter that gives up (Release of its token) leaves the
// queue at once, and the release reports ErrNotHeld since it held nothing.
func testFIFOGiveUp(e *env) {
	s := e.store()
	if !e.queuer(s) {
		return
	}
	key, ttl := e.key("fifo-giveup"), 4*e.ttl
	a, _ := e.storeAcquire(s, key, "A", ttl)
	b, c := e.request(key, "B", ttl), e.request(key, "C", ttl)
	e.queue(s, b, 0)
	e.queue(s, c, 1)
	e.wantNotHeld(s.Release(e.ctx, b), "Release of a queued token that holds nothing")
	e.queue(s, c, 0)
	if err := s.Release(e.ctx, a); err != nil {
		e.t.Fatalf("A's Release: %v", err)
	}
	e.grant(s, c)
}

// fifoCases are the FIFO subtests; Run includes them.
var fifoCases = []struct {
	name string
	fn   func(e *env)
}{
	{"FIFOOrder", testFIFOOrder},
	{"FIFOWaiterExpires", testFIFOWaiterExpires},
	{"FIFOGiveUp", testFIFOGiveUp},
	{"FIFOClients", testFIFOClients},
	{"FIFOAnnounceNext", testFIFOAnnounceNext},
	{"FIFOWakesHead", testFIFOWakesHead},
}

// RunFIFO runs only the FIFO subtests of the suite (Run runs them too): a
// shortcut while developing a store's queue of waiters.
func RunFIFO(t *testing.T, h Harness) {
	t.Helper()
	if h.TTL == 0 {
		h.TTL = DefaultTTL
	}
	for _, tc := range fifoCases {
		t.Run(tc.name, func(t *testing.T) { tc.fn(newEnv(t, h)) })
	}
}

// waitQueued waits until key has at least n live waiters queued, as a
// non-queued probe sees them (HeldError.Queued).
func (e *env) waitQueued(s driver.Store, key string, n int) {
	e.t.Helper()
	deadline := time.Now().Add(10*e.ttl + 5*time.Second)
	for {
		_, err := s.Acquire(e.ctx, e.request(key, "probe", e.ttl))
		var he *lease.HeldError
		if errors.As(err, &he) && he.Queued >= n {
			return
		}
		if err == nil {
			e.t.Fatalf("the probe acquired %q: nobody holds it or waits for it", key)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%q: fewer than %d waiters queued after %v (last: %v)", key, n, 10*e.ttl+5*time.Second, err)
		}
		e.sleep(10 * time.Millisecond)
	}
}

// testFIFOClients: Clients that wait in Acquire get the key in the order they
// started waiting, and the releaser who asks again goes to the back.
func testFIFOClients(e *env) {
	probe := e.store()
	if !e.queuer(probe) {
		return
	}
	key := e.key("fifo-clients")
	// Nobody's lease or place in the queue may lapse (a busy machine's late
	// renewals): the key would then go out of order, or to the probe.
	hs := e.store()
	long := lease.WithTTL(e.longTTL(hs))
	holder := e.client(hs, long)
	first := e.tryAcquire(holder, key)
	type got struct {
		who string
		l   *lease.Lease
		err error
	}
	order := make(chan got, 4)
	// The waiters' releases finish before the test ends (and its ctx with
	// it): a store that hands the key over in the release may let the next
	// holder, and so the test, go on before the releaser has its answer.
	var wg sync.WaitGroup
	names := []string{"W1", "W2", "W3"}
	for i, name := range names {
		c := e.client(e.store(), lease.WithHolder(name), long)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(e.ctx, key)
			order <- got{name, l, err}
			if err == nil {
				time.Sleep(e.ttl / 10) // hold briefly, then pass it on
				if err := l.Release(e.ctx); err != nil {
					e.t.Errorf("%s's Release: %v", name, err)
				}
			}
		}()
		e.waitQueued(probe, key, i+1) // W(i+1) is queued before the next starts
	}
	if err := first.Release(e.ctx); err != nil {
		e.t.Fatalf("the first holder's Release: %v", err)
	}
	// The releaser asks again at once: it must queue behind W1..W3.
	wg.Add(1)
	go func() {
		defer wg.Done()
		l, err := holder.Acquire(e.ctx, key)
		order <- got{"releaser", l, err}
		if err == nil {
			_ = l.Release(e.ctx)
		}
	}()
	last := first.Fence()
	for _, want := range append(names, "releaser") {
		var g got
		select {
		case g = <-order:
		case <-e.ctx.Done():
			e.t.Fatalf("waiting for %s to acquire: %v", want, e.ctx.Err())
		}
		if g.err != nil {
			e.t.Fatalf("%s's Acquire: %v", g.who, g.err)
		}
		if g.who != want {
			e.t.Fatalf("%s acquired before %s: not FIFO", g.who, want)
		}
		if g.l.Fence() <= last {
			e.t.Errorf("%s's fence %d is not above the previous %d", g.who, g.l.Fence(), last)
		}
		last = g.l.Fence()
	}
	wg.Wait()
}
