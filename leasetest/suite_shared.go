// Conformance: shared holds (read-write leases) for stores with Caps.Shared:
// readers together, exclusion between a writer and readers, fences per read
// epoch, expiry, writers not starved, announcements and the Client's side.

package leasetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// sharedCases are the read-write subtests; Run appends them to cases.
var sharedCases = []struct {
	name string
	fn   func(e *env)
}{
	{"SharedReaders", testSharedReaders},
	{"SharedExpiry", testSharedExpiry},
	{"SharedQueue", testSharedQueue},
	{"SharedAnnounce", testSharedAnnounce},
	{"SharedClient", testSharedClient},
	{"SharedWriterNotStarved", testSharedWriterNotStarved},
	{"SharedLoss", testSharedLoss},
}

// sharer skips the subtest unless s keeps shared holds (Caps.Shared).
func (e *env) sharer(s driver.Store) {
	e.t.Helper()
	if !s.Caps().Shared {
		e.t.Skipf("lacks capability Caps.Shared: %T keeps no shared holds", s)
	}
}

// reader returns a shared request of key for a new token.
func reader(key, holder string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Token: token(), Holder: holder, TTL: ttl, Shared: true}
}

// grantShared acquires r (shared) at the store level and fails the test
// unless it is granted with fence want (0: any fence above 0).
func (e *env) grantShared(s driver.Store, r driver.Request, want uint64) uint64 {
	e.t.Helper()
	g, err := e.acquireRetried(s, r)
	switch {
	case err != nil:
		e.t.Fatalf("shared Acquire(%q) for %s: %v", r.Key, r.Holder, err)
	case g.Fence == 0:
		e.t.Fatalf("shared Acquire(%q) for %s: fence 0, want > 0", r.Key, r.Holder)
	case want != 0 && g.Fence != want:
		e.t.Fatalf("shared Acquire(%q) for %s: fence %d, want %d (the read epoch's)", r.Key, r.Holder, g.Fence, want)
	}
	return g.Fence
}

// refused acquires r and fails the test unless the store refuses it with a
// *lease.HeldError, which it returns.
func (e *env) refused(s driver.Store, r driver.Request) *lease.HeldError {
	e.t.Helper()
	_, err := e.acquireRetried(s, r)
	var he *lease.HeldError
	if !errors.As(err, &he) {
		e.t.Fatalf("Acquire(%q) for %s (shared %v) = %v, want a *lease.HeldError", r.Key, r.Holder, r.Shared, err)
	}
	return he
}

// wantReaders checks that the store reports key held by n live readers with
// fence.
func (e *env) wantReaders(s driver.Store, key string, n int, fence uint64) {
	e.t.Helper()
	info := e.inspect(s, key)
	if !info.Held || !info.Shared || info.Readers != n || info.Fence != fence || info.Remaining <= 0 {
		e.t.Fatalf("Inspect(%q) = %+v; want held shared by %d readers, fence %d, time remaining", key, info, n, fence)
	}
}

// testSharedReaders: readers share a key and its fence; a writer is refused
// while they hold and gets a larger fence after them; readers are refused
// while the writer holds.
func testSharedReaders(e *env) {
	s := e.store()
	e.sharer(s)
	key, ttl := e.key("rw"), e.longTTL(s)
	r1, r2 := reader(key, "r1", ttl), reader(key, "r2", ttl)
	epoch := e.grantShared(s, r1, 0)
	e.grantShared(s, r2, epoch)
	e.grantShared(s, r1, epoch) // a retried Acquire: same fence
	e.wantReaders(s, key, 2, epoch)

	w := driver.Request{Key: key, Token: token(), Holder: "w", TTL: ttl}
	he := e.refused(s, w)
	if he.Fence != epoch || (he.Holder != "r1" && he.Holder != "r2") || he.Remaining <= 0 {
		e.t.Fatalf("writer refused with %+v; want a reader as holder, fence %d, time remaining", he, epoch)
	}
	if err := s.Release(e.ctx, r1); err != nil {
		e.t.Fatalf("Release of reader r1: %v", err)
	}
	e.wantNotHeld(s.Release(e.ctx, r1), "second Release of reader r1")
	e.wantNotHeld(s.Renew(e.ctx, r1), "Renew of released reader r1")
	r3 := reader(key, "r3", ttl)
	e.grantShared(s, r3, epoch) // joins r2's epoch
	e.wantReaders(s, key, 2, epoch)
	for _, r := range []driver.Request{r2, r3} {
		if err := s.Renew(e.ctx, r); err != nil {
			e.t.Fatalf("Renew of reader %s: %v", r.Holder, err)
		}
		if err := s.Release(e.ctx, r); err != nil {
			e.t.Fatalf("Release of reader %s: %v", r.Holder, err)
		}
	}
	if info := e.inspect(s, key); info.Held {
		e.t.Fatalf("Inspect after every reader left = %+v, want free", info)
	}

	g, err := s.Acquire(e.ctx, w)
	if err != nil || g.Fence <= epoch {
		e.t.Fatalf("writer after the readers: fence %d, %v; want a fence above the readers' %d", g.Fence, err, epoch)
	}
	r4 := reader(key, "r4", ttl)
	e.wantHeld(e.refused(s, r4), key, "w", g.Fence)
	e.wantNotHeld(s.Renew(e.ctx, r4), "Renew of a reader that was refused")
	if info := e.inspect(s, key); !info.Held || info.Shared || info.Holder != "w" {
		e.t.Fatalf("Inspect while the writer holds = %+v, want held by w, not shared", info)
	}
	if err := s.Release(e.ctx, w); err != nil {
		e.t.Fatalf("Release of the writer: %v", err)
	}
	if f := e.grantShared(s, r4, 0); f <= g.Fence {
		e.t.Fatalf("reader after the writer: fence %d, want above the writer's %d", f, g.Fence)
	}
}

// testSharedExpiry: a reader that is not renewed expires alone; the key is
// free for a writer once the last reader is gone.
func testSharedExpiry(e *env) {
	s := e.store()
	e.sharer(s)
	key, long := e.key("rw"), e.longTTL(s)
	short, stay := reader(key, "short", e.ttl), reader(key, "stay", long)
	epoch := e.grantShared(s, short, 0)
	e.grantShared(s, stay, epoch)
	if err := s.Renew(e.ctx, short); err != nil {
		e.t.Fatalf("Renew of a live reader: %v", err)
	}
	e.sleep(e.expiryWait())
	e.wantNotHeld(s.Renew(e.ctx, short), "Renew of an expired reader")
	e.wantReaders(s, key, 1, epoch)
	w := driver.Request{Key: key, Token: token(), Holder: "w", TTL: long}
	if he := e.refused(s, w); he.Holder != "stay" || he.Fence != epoch {
		e.t.Fatalf("writer refused with %+v; want the live reader stay, fence %d", he, epoch)
	}
	if err := s.Release(e.ctx, stay); err != nil {
		e.t.Fatalf("Release of the last reader: %v", err)
	}
	if g, err := s.Acquire(e.ctx, w); err != nil || g.Fence <= epoch {
		e.t.Fatalf("writer after the readers: fence %d, %v; want a fence above %d", g.Fence, err, epoch)
	}
}

// testSharedQueue: FIFO across readers and writers: a reader arriving after
// a waiting writer waits behind it, readers queued ahead of a reader are no
// obstacle, and readers let in together share a fence.
func testSharedQueue(e *env) {
	s := e.store()
	e.sharer(s)
	e.queuer(s)
	key, ttl := e.key("rw"), e.longTTL(s)
	r1 := reader(key, "r1", ttl)
	epoch := e.grantShared(s, r1, 0)
	w1 := driver.Request{Key: key, Token: token(), Holder: "w1", TTL: ttl}
	e.queue(s, w1, 0)
	r2 := reader(key, "r2", ttl)
	e.queue(s, r2, 1)           // a writer waits ahead: no joining r1
	e.grantShared(s, r1, epoch) // r1's retried Acquire: refreshed, whoever waits
	if he := e.refused(s, reader(key, "unqueued", ttl)); he.Queued != 2 {
		e.t.Fatalf("unqueued reader refused with %d waiters ahead, want 2", he.Queued)
	}
	e.release(s, r1)
	g1 := e.grant(s, w1)
	if g1.Fence <= epoch {
		e.t.Fatalf("writer's fence %d, want above the readers' %d", g1.Fence, epoch)
	}
	e.queue(s, r2, 0)
	w2 := driver.Request{Key: key, Token: token(), Holder: "w2", TTL: ttl}
	e.queue(s, w2, 1)
	r3 := reader(key, "r3", ttl)
	e.queue(s, r3, 2)
	e.release(s, w1)
	r2.Queue = true
	epoch = e.grantShared(s, r2, 0)
	if epoch <= g1.Fence {
		e.t.Fatalf("reader's fence %d, want above the writer's %d", epoch, g1.Fence)
	}
	e.queue(s, r3, 1) // w2 waits ahead of r3
	e.release(s, r2)
	g2 := e.grant(s, w2)
	e.queue(s, r3, 0)
	r4 := reader(key, "r4", ttl)
	e.queue(s, r4, 1)
	e.release(s, w2)
	r4.Queue, r3.Queue = true, true
	epoch = e.grantShared(s, r4, 0) // r3 is queued ahead, but a reader
	if epoch <= g2.Fence {
		e.t.Fatalf("reader's fence %d, want above the writer's %d", epoch, g2.Fence)
	}
	e.grantShared(s, r3, epoch)
	e.wantReaders(s, key, 2, epoch)
}

// release releases r at the store level and fails the test on error.
func (e *env) release(s driver.Store, r driver.Request) {
	e.t.Helper()
	if err := s.Release(e.ctx, r); err != nil {
		e.t.Fatalf("Release(%q) of %s: %v", r.Key, r.Holder, err)
	}
}

// testSharedAnnounce: the key is announced when its writer leaves, without
// Next when the head waiter is a reader, and when its last reader leaves
// while a writer waits.
func testSharedAnnounce(e *env) {
	s := e.store()
	e.sharer(s)
	sub := e.announcer(s)
	key, ttl := e.key("rw"), e.longTTL(s)
	w := driver.Request{Key: key, Token: token(), Holder: "w", TTL: ttl}
	e.grant(s, w)
	r1, r2 := reader(key, "r1", ttl), reader(key, "r2", ttl)
	e.queue(s, r1, 0)
	e.release(s, w)
	if a := e.announcement(sub, key); a.Next != "" {
		e.t.Fatalf("announcement with a reader at the head names Next %s, want none (readers all look)", short(a.Next))
	}
	r1.Queue = true
	epoch := e.grantShared(s, r1, 0)
	e.grantShared(s, r2, epoch)
	w2 := driver.Request{Key: key, Token: token(), Holder: "w2", TTL: ttl}
	e.queue(s, w2, 0)
	e.release(s, r1)
	e.release(s, r2)
	// Announcements only wake: one may come for r1's release as well.
	for {
		a := e.announcement(sub, key)
		if a.Next == "" || a.Next == w2.Token {
			if _, err := s.Acquire(e.ctx, w2); err == nil {
				return
			}
			continue // r1's announcement; r2's is to come
		}
		e.t.Fatalf("the last reader's release announced %q as next, want w2 (%q) or nobody", short(a.Next), short(w2.Token))
	}
}

// testSharedClient: the Client's side: readers of several clients hold
// together, renewed past their TTL; a writer waits for every one of them
// and gets a larger fence; a reader waits for the writer.
func testSharedClient(e *env) {
	s1 := e.store()
	e.sharer(s1)
	ttl := e.heartbeatTTL(s1)
	c1, c2, c3 := e.client(s1, lease.WithTTL(ttl)), e.client(e.store(), lease.WithTTL(ttl)), e.client(e.store(), lease.WithTTL(ttl))
	key := e.key("rw")
	l1, err := c1.TryAcquireShared(e.ctx, key)
	if err != nil {
		e.t.Fatalf("TryAcquireShared: %v", err)
	}
	l2, err := c2.AcquireShared(e.ctx, key)
	if err != nil {
		e.t.Fatalf("AcquireShared beside a reader: %v", err)
	}
	l1b, err := c1.AcquireShared(e.ctx, key) // a second reader of the same Client
	if err != nil {
		e.t.Fatalf("a second AcquireShared of one Client: %v", err)
	}
	if !l1.Shared() || l1.Fence() != l2.Fence() || l1b.Fence() != l1.Fence() {
		e.t.Fatalf("readers: shared %v, fences %d, %d, %d; want shared, one fence", l1.Shared(), l1.Fence(), l2.Fence(), l1b.Fence())
	}
	if _, err := c3.TryAcquire(e.ctx, key); !errors.Is(err, lease.ErrHeld) {
		e.t.Fatalf("TryAcquire of a key readers hold = %v, want ErrHeld", err)
	}
	type result struct {
		l   *lease.Lease
		err error
	}
	writer := make(chan result, 1)
	go func() {
		l, err := c3.Acquire(e.ctx, key)
		writer <- result{l, err}
	}()
	e.sleep(ttl + ttl/2) // the readers' heartbeats keep them past their TTL
	for i, l := range []*lease.Lease{l1, l2, l1b} {
		if err := l.Err(); err != nil {
			e.t.Fatalf("reader %d after %v: %v", i, ttl+ttl/2, err)
		}
	}
	for _, l := range []*lease.Lease{l1, l1b} {
		if err := l.Release(e.ctx); err != nil {
			e.t.Fatalf("Release of a reader: %v", err)
		}
	}
	select {
	case r := <-writer:
		e.t.Fatalf("writer acquired while reader l2 held the key: %v, %v", r.l, r.err)
	default:
	}
	if !errors.Is(context.Cause(l1.Context()), lease.ErrReleased) {
		e.t.Fatalf("a released reader's Context cause = %v, want ErrReleased", context.Cause(l1.Context()))
	}
	if err := l2.Release(e.ctx); err != nil {
		e.t.Fatalf("Release of the last reader: %v", err)
	}
	var w result
	select {
	case w = <-writer:
	case <-e.ctx.Done():
		e.t.Fatalf("writer still waiting after the readers left")
	}
	if w.err != nil || w.l.Shared() || w.l.Fence() <= l1.Fence() {
		e.t.Fatalf("writer: %v; want an exclusive lease with a fence above the readers' %d", w.err, l1.Fence())
	}
	if _, err := c3.TryAcquireShared(e.ctx, key); !errors.Is(err, lease.ErrHeld) {
		e.t.Fatalf("TryAcquireShared of a key this Client writes = %v, want ErrHeld (Self)", err)
	}
	rd := make(chan result, 1)
	go func() {
		l, err := c1.AcquireShared(e.ctx, key)
		rd <- result{l, err}
	}()
	if err := w.l.Release(e.ctx); err != nil {
		e.t.Fatalf("Release of the writer: %v", err)
	}
	select {
	case r := <-rd:
		if r.err != nil || r.l.Fence() <= w.l.Fence() {
			e.t.Fatalf("reader after the writer: %v; want a fence above the writer's %d", r.err, w.l.Fence())
		}
	case <-e.ctx.Done():
		e.t.Fatalf("reader still waiting after the writer left")
	}
}

// waitersAhead returns how many live waiters s has queued for key: it asks
// for key exclusively with a new token, not queued, while key is held.
func (e *env) waitersAhead(s driver.Store, key string) int {
	e.t.Helper()
	return e.refused(s, driver.Request{Key: key, Token: token(), Holder: "probe", TTL: e.ttl}).Queued
}

// awaitWaiters waits until s has n live waiters queued for key.
func (e *env) awaitWaiters(s driver.Store, key string, n int) {
	e.t.Helper()
	for e.waitersAhead(s, key) != n {
		e.sleep(20 * time.Millisecond)
	}
}

// testSharedWriterNotStarved: with a reader holding and a writer waiting, a
// new reader waits behind the writer; they get the key in arrival order.
func testSharedWriterNotStarved(e *env) {
	s := e.store()
	e.sharer(s)
	e.queuer(s)
	ttl := e.heartbeatTTL(s)
	c1, c2, c3 := e.client(s, lease.WithTTL(ttl)), e.client(e.store(), lease.WithTTL(ttl)), e.client(e.store(), lease.WithTTL(ttl))
	key := e.key("rw")
	first, err := c1.AcquireShared(e.ctx, key)
	if err != nil {
		e.t.Fatalf("AcquireShared: %v", err)
	}
	var order []string
	done := make(chan string, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	acquire := func(c *lease.Client, name string, shared bool) {
		defer wg.Done()
		get := c.Acquire
		if shared {
			get = c.AcquireShared
		}
		l, err := get(e.ctx, key)
		if err != nil {
			done <- name + ": " + err.Error()
			return
		}
		done <- name
		time.Sleep(ttl / 4) // hold a while: the other must not get in meanwhile
		_ = l.Release(e.ctx)
	}
	wg.Add(2)
	go acquire(c2, "writer", false)
	e.awaitWaiters(s, key, 1)
	go acquire(c3, "reader", true)
	e.awaitWaiters(s, key, 2)
	if err := first.Release(e.ctx); err != nil {
		e.t.Fatalf("Release of the first reader: %v", err)
	}
	for range 2 {
		select {
		case name := <-done:
			order = append(order, name)
		case <-e.ctx.Done():
			e.t.Fatalf("waiters still waiting; got %v", order)
		}
	}
	if !slices.Equal(order, []string{"writer", "reader"}) {
		e.t.Fatalf("order of the waiters = %v, want [writer reader]: the reader came after the waiting writer", order)
	}
}

// testSharedLoss: a reader whose renewals fail is lost at its local
// deadline like any lease, and its store frees the key for a writer.
func testSharedLoss(e *env) {
	fs := e.faulty()
	e.sharer(fs)
	c := e.client(fs)
	key := e.key("rw")
	l, err := c.TryAcquireShared(e.ctx, key)
	if err != nil {
		e.t.Fatalf("TryAcquireShared: %v", err)
	}
	fs.FailRenewals(errors.New("injected renewal failure"))
	if !e.waitClosed(l.Done(), 10*e.ttl) {
		e.t.Fatalf("reader not lost within %v of failing renewals", 10*e.ttl)
	}
	if !errors.Is(l.Err(), lease.ErrLost) {
		e.t.Fatalf("reader's Err = %v, want ErrLost", l.Err())
	}
	w := e.client(e.store())
	e.sleep(e.expiryWait())
	lw, err := w.TryAcquire(e.ctx, key)
	if err != nil {
		e.t.Fatalf("writer after the lost reader's TTL: %v", err)
	}
	if lw.Fence() <= l.Fence() {
		e.t.Fatalf("writer's fence %d, want above the lost reader's %d", lw.Fence(), l.Fence())
	}
}
