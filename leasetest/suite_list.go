// Conformance: listing keys (driver.Lister) and breaking leases
// (driver.Breaker), at the store level and through Client.List and
// ForceRelease, down to the evicted holder's write refused by its fence.

package leasetest

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// listCases are the listing and breaking subtests; Run appends them.
var listCases = []struct {
	name string
	fn   func(e *env)
}{
	{"ListHolders", testListHolders},
	{"ListPrefix", testListPrefix},
	{"ListPaging", testListPaging},
	{"ListClient", testListClient},
	{"BreakStore", testBreakStore},
	{"BreakFree", testBreakFree},
	{"BreakShared", testBreakShared},
	{"BreakQueue", testBreakQueue},
	{"BreakFenced", testBreakFenced},
}

// lister returns s as a driver.Lister, or skips the subtest.
func (e *env) lister(s driver.Store) driver.Lister {
	e.t.Helper()
	ls, ok := s.(driver.Lister)
	if !ok {
		e.t.Skipf("lacks capability driver.Lister: %T cannot list its keys", s)
	}
	return ls
}

// breaker returns s as a driver.Breaker, or skips the subtest.
func (e *env) breaker(s driver.Store) driver.Breaker {
	e.t.Helper()
	br, ok := s.(driver.Breaker)
	if !ok {
		e.t.Skipf("lacks capability driver.Breaker: %T cannot break leases", s)
	}
	return br
}

// listAll lists every key of prefix, limit keys a page, and returns them by
// key; it fails the test on an error, a key seen with two different views or
// a listing that does not end.
func (e *env) listAll(ls driver.Lister, prefix string, limit int) map[string]driver.Entry {
	e.t.Helper()
	all := make(map[string]driver.Entry)
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1_000_000 {
			e.t.Fatalf("List(%q) did not end after %d pages", prefix, pages)
		}
		page, next, err := ls.List(e.ctx, prefix, cursor, limit)
		if err != nil {
			e.t.Fatalf("List(%q, cursor %q, %d): %v", prefix, cursor, limit, err)
		}
		for _, en := range page {
			all[en.Key] = en // a repeat (a backend's rescan) is the same key
		}
		if next == "" {
			return all
		}
		if next == cursor {
			e.t.Fatalf("List(%q): cursor %q returned again", prefix, cursor)
		}
		cursor = next
	}
}

// holderOf returns the holder of en with token, or fails the test.
func (e *env) holderOf(en driver.Entry, token string) driver.Holder {
	e.t.Helper()
	for _, h := range en.Holders {
		if h.Token == token {
			return h
		}
	}
	e.t.Fatalf("List: %q: no holder with the token among %d holders: %+v", en.Key, len(en.Holders), en.Holders)
	return driver.Holder{}
}

// testListHolders: a writer, a waiter and readers are listed as they are; a
// released key is not listed.
func testListHolders(e *env) {
	s := e.store()
	ls := e.lister(s)
	ttl := e.longTTL(s)
	wkey, rkey, gone := e.key("writer"), e.key("readers"), e.key("gone")
	w, wg := e.storeAcquire(s, wkey, "the-writer", ttl)
	g, _ := e.storeAcquire(s, gone, "gone", ttl)
	if err := s.Release(e.ctx, g); err != nil {
		e.t.Fatalf("Release: %v", err)
	}
	var waiter driver.Request
	if s.Caps().FIFO {
		waiter = driver.Request{Key: wkey, Token: token(), Holder: "waiter", TTL: ttl, Queue: true}
		e.queue(s, waiter, 0)
	}
	var readers []driver.Request
	if s.Caps().Shared {
		readers = []driver.Request{reader(rkey, "reader-1", ttl), reader(rkey, "reader-2", ttl)}
		f := e.grantShared(s, readers[0], 0)
		e.grantShared(s, readers[1], f)
	}
	all := e.listAll(ls, "", 100)
	if _, ok := all[gone]; ok {
		e.t.Errorf("List: released key %q is listed: %+v", gone, all[gone])
	}
	en, ok := all[wkey]
	if !ok {
		e.t.Fatalf("List: held key %q missing from %d keys", wkey, len(all))
	}
	if len(en.Holders) != 1 {
		e.t.Fatalf("List: %q has %d holders, want 1: %+v", wkey, len(en.Holders), en.Holders)
	}
	h := e.holderOf(en, w.Token)
	if h.Holder != "the-writer" || h.Fence != wg.Fence || h.Shared || h.Remaining < 0 || h.Remaining > ttl+ttl/10 {
		e.t.Errorf("List: %q holder = %+v; want the-writer, fence %d, exclusive, remaining within %v", wkey, h, wg.Fence, ttl)
	}
	if s.Caps().FIFO && (len(en.Waiters) != 1 || en.Waiters[0].Token != waiter.Token || en.Waiters[0].Shared) {
		e.t.Errorf("List: %q waiters = %+v, want the one exclusive waiter", wkey, en.Waiters)
	}
	if !s.Caps().Shared {
		return
	}
	en = all[rkey]
	if len(en.Holders) != 2 {
		e.t.Fatalf("List: %q has %d holders, want 2 readers: %+v", rkey, len(en.Holders), en)
	}
	for _, r := range readers {
		if h := e.holderOf(en, r.Token); !h.Shared || h.Holder != r.Holder || h.Fence != en.Holders[0].Fence {
			e.t.Errorf("List: %q reader = %+v, want shared by %s with the epoch's fence", rkey, h, r.Holder)
		}
	}
}

// testListPrefix: only the keys that start with the prefix are listed, even
// when it holds characters that patterns give a meaning to.
func testListPrefix(e *env) {
	s := e.store()
	ls := e.lister(s)
	ttl := e.longTTL(s)
	prefix := "p%_*?[x]\\-" + randHex(2) + "/"
	in := []string{prefix + "a", prefix + "b/c"}
	out := []string{"p%_*?[x]\\-zz/a", "pX_*?[x]\\-" + prefix[len(prefix)-3:] + "a", "p" + prefix}
	for _, k := range slices.Concat(in, out) {
		e.storeAcquire(s, k, "h", ttl)
	}
	all := e.listAll(ls, prefix, 100)
	var got []string
	for k := range all {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, in) {
		e.t.Errorf("List(%q) = %q, want %q", prefix, got, in)
	}
	if all := e.listAll(ls, "", 100); len(all) != len(in)+len(out) {
		e.t.Errorf("List(\"\") found %d keys, want the namespace's %d", len(all), len(in)+len(out))
	}
}

// testListPaging: more keys than a page, listed a few at a time, each seen.
func testListPaging(e *env) {
	s := e.store()
	ls := e.lister(s)
	ttl := e.longTTL(s)
	const n = 120
	want := make([]string, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range want {
		want[i] = e.key("page")
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r := driver.Request{Key: want[i], Token: token(), Holder: "h", TTL: ttl}
			if _, err := s.Acquire(e.ctx, r); err != nil {
				mu.Lock()
				e.t.Errorf("Acquire(%q): %v", want[i], err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if e.t.Failed() {
		return
	}
	all := e.listAll(ls, "page-", 7)
	for _, k := range want {
		if en, ok := all[k]; !ok || len(en.Holders) != 1 {
			e.t.Errorf("List with pages of 7: %q missing or not held: %+v", k, en)
		}
	}
	if len(all) != n {
		e.t.Errorf("List with pages of 7: %d keys, want %d", len(all), n)
	}
}

// testListClient: Client.List shows kinds, holders, waiters and digests,
// never tokens.
func testListClient(e *env) {
	s := e.store()
	e.lister(s)
	// A long TTL: List reads right after the acquisitions, and on a loaded
	// ensemble a short one ran out before a renewal landed.
	c := e.client(s, lease.WithTTL(e.longTTL(s)), lease.WithHolder("lister"))
	key, sem := e.key("client"), e.key("sem")
	l := e.tryAcquire(c, key)
	sl, err := c.TrySemaphore(e.ctx, sem, 3)
	if err != nil {
		e.t.Fatalf("TrySemaphore: %v", err)
	}
	got := map[string]lease.KeyInfo{}
	for k, err := range c.List(e.ctx, "") {
		if err != nil {
			e.t.Fatalf("Client.List: %v", err)
		}
		got[k.Key] = k
	}
	k := got[key]
	if k.Kind != lease.KindExclusive || len(k.Holders) != 1 || k.Holders[0].Holder != "lister" || k.Fence() != l.Fence() {
		e.t.Errorf("Client.List: %q = %+v; want exclusive, held by lister with fence %d", key, k, l.Fence())
	}
	if len(k.Holders) == 1 && (k.Holders[0].ID == "" || k.Holders[0].ID == l.Token()) {
		e.t.Errorf("Client.List: holder ID %q: want a digest, not the token", k.Holders[0].ID)
	}
	k = got[sl.Key()]
	if k.Kind != lease.KindSemaphore || k.Semaphore != sem || k.N != 3 || len(k.Holders) != 1 || k.Holders[0].Holder != "lister" {
		e.t.Errorf("Client.List: slot %q = %+v; want a slot of semaphore %q (n=3) held by lister", sl.Key(), k, sem)
	}
	if len(got) != 2 {
		e.t.Errorf("Client.List: %d keys, want 2 (the lease's Err: %v, the slot's: %v)", len(got), l.Err(), sl.Err())
	}
}

// testBreakStore: Break frees a writer's key; the evicted token's renewal
// says ErrBroken, its release ErrNotHeld; the next fence is larger.
func testBreakStore(e *env) {
	s, other := e.store(), e.store()
	br := e.breaker(other)
	key := e.key("break")
	ttl := e.longTTL(s)
	r, g := e.storeAcquire(s, key, "stuck", ttl)
	en, err := br.Break(e.ctx, key)
	if err != nil {
		e.t.Fatalf("Break: %v", err)
	}
	if len(en.Holders) != 1 || en.Holders[0].Token != r.Token || en.Holders[0].Holder != "stuck" || en.Holders[0].Fence != g.Fence {
		e.t.Errorf("Break = %+v; want the evicted writer stuck with fence %d", en, g.Fence)
	}
	if info := e.inspect(other, key); info.Held {
		e.t.Errorf("after Break: Inspect = %+v, want free", info)
	}
	if err := s.Renew(e.ctx, r); !errors.Is(err, lease.ErrBroken) || !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("Renew of the evicted token = %v, want one matching ErrBroken and ErrNotHeld", err)
	}
	if b, ok := s.(driver.BatchRenewer); ok {
		if errs := b.RenewMany(e.ctx, []driver.Request{r}); !errors.Is(errs[0], lease.ErrBroken) {
			e.t.Errorf("RenewMany of the evicted token = %v, want one matching ErrBroken", errs[0])
		}
	}
	if all := e.listAll(e.lister(other), "", 100); len(all[key].Holders) > 0 || (len(all[key].Broken) > 0 && !slices.Contains(all[key].Broken, r.Token)) {
		e.t.Errorf("after Break: List = %+v, want no holder (and the evicted token among Broken, if any)", all[key])
	}
	_, g2 := e.storeAcquire(other, key, "next", ttl)
	if g2.Fence <= g.Fence {
		e.t.Errorf("the grant after Break has fence %d, want > the evicted %d", g2.Fence, g.Fence)
	}
	e.wantNotHeld(s.Release(e.ctx, r), "Release of the evicted token")
	if info := e.inspect(other, key); !info.Held || info.Fence != g2.Fence {
		e.t.Errorf("the evicted token's Release freed the new holder's key: Inspect = %+v", info)
	}
}

// testBreakFree: breaking a free key, never used or released, changes
// nothing and is not an error.
func testBreakFree(e *env) {
	s := e.store()
	br := e.breaker(s)
	never, released := e.key("never"), e.key("released")
	r, _ := e.storeAcquire(s, released, "h", e.ttl)
	if err := s.Release(e.ctx, r); err != nil {
		e.t.Fatalf("Release: %v", err)
	}
	for _, k := range []string{never, released} {
		en, err := br.Break(e.ctx, k)
		if err != nil || len(en.Holders) != 0 {
			e.t.Errorf("Break(%q) of a free key = %+v, %v; want no holders, no error", k, en, err)
		}
	}
	_, g := e.storeAcquire(s, never, "after", e.ttl)
	if g.Fence == 0 {
		e.t.Errorf("Acquire after breaking a free key: fence 0")
	}
}

// testBreakShared: Break evicts every reader; the next reader starts a new
// epoch with a larger fence.
func testBreakShared(e *env) {
	s := e.store()
	e.sharer(s)
	br := e.breaker(s)
	key := e.key("rbreak")
	ttl := e.longTTL(s)
	r1, r2 := reader(key, "r1", ttl), reader(key, "r2", ttl)
	f := e.grantShared(s, r1, 0)
	e.grantShared(s, r2, f)
	en, err := br.Break(e.ctx, key)
	if err != nil {
		e.t.Fatalf("Break: %v", err)
	}
	if len(en.Holders) != 2 || !en.Holders[0].Shared || !en.Holders[1].Shared {
		e.t.Errorf("Break = %+v; want the 2 evicted readers", en)
	}
	for _, r := range []driver.Request{r1, r2} {
		if err := s.Renew(e.ctx, r); !errors.Is(err, lease.ErrBroken) {
			e.t.Errorf("Renew of evicted reader %s = %v, want one matching ErrBroken", r.Holder, err)
		}
	}
	if f2 := e.grantShared(s, reader(key, "r3", ttl), 0); f2 <= f {
		e.t.Errorf("a reader after Break has fence %d, want > the evicted epoch's %d", f2, f)
	}
}

// testBreakQueue: Break keeps the queue: the head waiter gets the key, a
// newcomer does not, and the break is announced.
func testBreakQueue(e *env) {
	s := e.store()
	e.queuer(s)
	br := e.breaker(s)
	var sub driver.Subscription
	if _, ok := s.(driver.Notifier); ok {
		sub = e.announcer(s)
	}
	key := e.key("qbreak")
	ttl := e.longTTL(s)
	e.storeAcquire(s, key, "stuck", ttl)
	waiter := driver.Request{Key: key, Token: token(), Holder: "waiter", TTL: ttl, Queue: true}
	e.queue(s, waiter, 0)
	en, err := br.Break(e.ctx, key)
	if err != nil {
		e.t.Fatalf("Break: %v", err)
	}
	if len(en.Waiters) != 1 || en.Waiters[0].Token != waiter.Token {
		e.t.Errorf("Break = %+v; want the queue's one waiter reported", en)
	}
	if sub != nil {
		if ann := e.announcement(sub, key); ann.Next != "" && ann.Next != waiter.Token {
			e.t.Errorf("the break's announcement names %q, want the head waiter or nobody", ann.Next)
		}
	}
	if _, err := s.Acquire(e.ctx, driver.Request{Key: key, Token: token(), Holder: "newcomer", TTL: ttl}); !errors.Is(err, lease.ErrHeld) {
		e.t.Errorf("a newcomer's Acquire after Break = %v, want refused: the queue's head is first", err)
	}
	if g, err := s.Acquire(e.ctx, waiter); err != nil || g.Fence == 0 {
		e.t.Errorf("the head waiter's Acquire after Break = %+v, %v; want granted", g, err)
	}
}

// register is a fenced register, as a data layer that checks fences keeps
// one: it refuses a write whose fence is older than the last one accepted.
type register struct {
	mu    sync.Mutex
	fence uint64
	value string
}

// write stores v if fence is not older than the register's.
func (r *register) write(fence uint64, v string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fence < r.fence {
		return false
	}
	r.fence, r.value = fence, v
	return true
}

// testBreakFenced: an operator breaks a stuck holder through the Client;
// the next holder's fence is larger, the evicted holder's write is refused by
// a fenced register, and the evicted Client loses its lease with LossBroken.
func testBreakFenced(e *env) {
	s, ops, next := e.store(), e.store(), e.store()
	e.breaker(ops)
	var stuckRec, opsRec Recorder
	ttl := e.heartbeatTTL(s)
	stuck := e.client(s, lease.WithTTL(ttl), lease.WithHolder("stuck"), lease.WithObserver(&stuckRec))
	operator := e.client(ops, lease.WithHolder("operator"), lease.WithObserver(&opsRec))
	successor := e.client(next, lease.WithTTL(ttl), lease.WithHolder("successor"))
	key := e.key("fenced")
	var reg register
	l := e.tryAcquire(stuck, key)
	if !reg.write(l.Fence(), "stuck-1") {
		e.t.Fatal("the first holder's write was refused")
	}
	k, err := operator.ForceRelease(e.ctx, key)
	if err != nil {
		e.t.Fatalf("ForceRelease: %v", err)
	}
	if len(k.Holders) != 1 || k.Holders[0].Holder != "stuck" || k.Holders[0].Fence != l.Fence() {
		e.t.Errorf("ForceRelease = %+v; want the evicted holder stuck with fence %d", k, l.Fence())
	}
	if ev, _, ok := opsRec.Find(0, time.Second, Kind(key, lease.EventBroken)); !ok || ev.Holder != "stuck" || ev.Fence != l.Fence() {
		e.t.Errorf("the operator's Client reported no broken event naming stuck (fence %d): %+v", l.Fence(), ev)
	}
	l2 := e.tryAcquire(successor, key)
	if l2.Fence() <= l.Fence() {
		e.t.Fatalf("the successor's fence %d is not larger than the evicted %d", l2.Fence(), l.Fence())
	}
	if !reg.write(l2.Fence(), "successor") {
		e.t.Fatal("the successor's write was refused")
	}
	if reg.write(l.Fence(), "stuck-2") {
		e.t.Error("the evicted holder's write was accepted after the break")
	}
	select { // the evicted holder learns at its next renewal
	case <-l.Done():
	case <-time.After(2*ttl + 5*time.Second):
		e.t.Fatalf("the evicted lease was not lost within %v", 2*ttl+5*time.Second)
	}
	var lost *lease.LostError
	if err := l.Err(); !errors.As(err, &lost) || lost.Reason != lease.LossBroken || !errors.Is(err, lease.ErrBroken) {
		e.t.Errorf("the evicted lease's Err = %v; want a *LostError for LossBroken matching ErrBroken", err)
	}
	if _, _, ok := stuckRec.Find(0, time.Second, func(ev lease.Event) bool {
		return ev.Kind == lease.EventLost && ev.Key == key && ev.Reason == lease.LossBroken
	}); !ok {
		e.t.Error("the evicted Client reported no lost event with reason broken")
	}
	if info := e.inspect(ops, key); !info.Held || info.Fence != l2.Fence() {
		e.t.Errorf("after the evicted holder's loss: Inspect = %+v, want the successor's fence %d", info, l2.Fence())
	}
}
