// Conformance: release announcements that name the next waiter
// (Announcement.Next), and hand-offs that wake only that waiter.

package leasetest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// announcer subscribes to s, or skips the subtest when s is not a FIFO
// store that announces releases.
func (e *env) announcer(s driver.Store) driver.Subscription {
	e.t.Helper()
	if !e.queuer(s) {
		return nil
	}
	n, ok := s.(driver.Notifier)
	if !ok {
		e.t.Skipf("lacks capability driver.Notifier: %T does not announce releases", s)
		return nil
	}
	sub, err := n.Subscribe(e.ctx)
	if err != nil {
		e.t.Fatalf("Subscribe: %v", err)
	}
	e.t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// announcement returns the next announcement of key, skipping others, within
// a bounded time.
func (e *env) announcement(a driver.Subscription, key string) driver.Announcement {
	e.t.Helper()
	ann, ok := e.announcementWithin(a, key, 10*time.Second)
	if !ok {
		e.t.Fatalf("no announcement of %q within 10s", key)
	}
	return ann
}

// announcementWithin returns the next release announcement of key, skipping
// others, if one comes within d.
func (e *env) announcementWithin(a driver.Subscription, key string, d time.Duration) (driver.Announcement, bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, d)
	defer cancel()
	for {
		ann, err := a.Next(ctx)
		if err != nil {
			if ctx.Err() != nil && e.ctx.Err() == nil {
				return driver.Announcement{}, false
			}
			e.t.Fatalf("Next (waiting for %q): %v", key, err)
		}
		if ann.Key == key {
			return ann, true
		}
	}
}

// testFIFOAnnounceNext: each release announces the waiter at the head of the
// queue as the next holder, and nobody once the queue is empty.
func testFIFOAnnounceNext(e *env) {
	s := e.store()
	a := e.announcer(s)
	if a == nil {
		return
	}
	key, ttl := e.key("fifo-announce"), 4*e.ttl
	ra, _ := e.storeAcquire(s, key, "A", ttl)
	b, c := e.request(key, "B", ttl), e.request(key, "C", ttl)
	e.queue(s, b, 0)
	e.queue(s, c, 1)
	if err := s.Release(e.ctx, ra); err != nil {
		e.t.Fatalf("A's Release: %v", err)
	}
	got := e.announcement(a, key)
	if got.Next == "" {
		e.t.Skipf("lacks capability: %T's announcements do not name the next waiter, every waiter wakes", s)
	}
	if got.Next != b.Token {
		e.t.Fatalf("A's release announced %q as next, want B (%q)", short(got.Next), short(b.Token))
	}
	e.grant(s, b)
	if err := s.Release(e.ctx, b); err != nil {
		e.t.Fatalf("B's Release: %v", err)
	}
	if got := e.announcement(a, key); got.Next != c.Token {
		e.t.Fatalf("B's release announced %q as next, want C (%q)", short(got.Next), short(c.Token))
	}
	e.grant(s, c)
	if err := s.Release(e.ctx, c); err != nil {
		e.t.Fatalf("C's Release: %v", err)
	}
	// Nobody is queued: the store announces nobody, or nothing at all (a
	// store that announces only to watching waiters).
	if got, ok := e.announcementWithin(a, key, time.Second); ok && got.Next != "" {
		e.t.Fatalf("C's release, with nobody queued, announced %q as next, want nobody", short(got.Next))
	}
}

// testFIFOWakesHead: Clients taking turns on one key do not all look at
// every release: only the announced head does, so each acquisition costs
// about two store acquires (queueing, then the grant) whatever the number
// of waiters, where waking everyone costs one per waiter.
func testFIFOWakesHead(e *env) {
	if e.announcer(e.store()) == nil {
		return
	}
	const workers, rounds = 6, 4
	key := e.key("fifo-wakes-head")
	var (
		stores []*FaultyStore
		wg     sync.WaitGroup
		turns  atomic.Int64
	)
	ttl := 4 * e.ttl // waiters' timers (a renew interval) rarely fire
	for i := range workers {
		fs := e.faulty()
		stores = append(stores, fs)
		c := e.client(fs, lease.WithTTL(ttl))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := c.Acquire(e.ctx, key)
				if err != nil {
					e.t.Errorf("worker %d: Acquire: %v", i, err)
					return
				}
				turns.Add(1)
				time.Sleep(2 * time.Millisecond)
				if err := l.Release(e.ctx); err != nil {
					e.t.Errorf("worker %d: Release: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var acquires int64
	for _, fs := range stores {
		acquires += fs.Acquires()
	}
	n := turns.Load()
	if n != workers*rounds {
		e.t.Fatalf("%d acquisitions, want %d", n, workers*rounds)
	}
	per := float64(acquires) / float64(n)
	e.t.Logf("%d store acquires for %d acquisitions by %d workers: %.2f each", acquires, n, workers, per)
	// Waking every waiter costs about workers acquires per acquisition.
	if per > 3.5 {
		e.t.Errorf("%.2f store acquires per acquisition with %d workers: releases wake more than the announced head", per, workers)
	}
}

func short(token string) string {
	if len(token) > 8 {
		return token[:8] + "…"
	}
	return token
}
