// Client-level subtests of the conformance suite: acquisition, races, fences,
// heartbeat, Do, Close, input validation, many leases and Inspect.

package leasetest

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

var tokenRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// testAcquireHeld: a free key is acquired; a held key reports its holder.
func testAcquireHeld(e *env) {
	holder := "holder-one-" + randHex(4)
	c1 := e.client(e.store(), lease.WithHolder(holder))
	c2 := e.client(e.store())
	key := e.key("held")
	l := e.tryAcquire(c1, key)
	if l.Fence() == 0 {
		e.t.Errorf("Fence() = 0, want > 0")
	}
	if !tokenRE.MatchString(l.Token()) {
		e.t.Errorf("Token() = %q, want 32 lowercase hex characters", l.Token())
	}
	if l.Key() != key {
		e.t.Errorf("Key() = %q, want %q", l.Key(), key)
	}
	if err := l.Err(); err != nil {
		e.t.Errorf("Err() = %v, want nil while held", err)
	}
	if r := l.Remaining(); r <= 0 || r > e.ttl {
		e.t.Errorf("Remaining() = %v, want in (0, %v]", r, e.ttl)
	}
	if closed(l.Done()) {
		e.t.Errorf("Done() is closed while held")
	}
	l2, err := c2.TryAcquire(e.ctx, key)
	if l2 != nil {
		e.t.Errorf("second TryAcquire returned a lease with error %v", err)
	}
	e.wantHeld(err, key, holder, l.Fence())
}

// testRace: many clients race for one key; exactly one wins.
func testRace(e *env) {
	const clients, perClient = 4, 8
	cs := make([]*lease.Client, clients)
	for i := range cs {
		cs[i] = e.client(e.store())
	}
	key := e.key("race")
	// A long TTL: on a saturated host the race can take longer than the
	// suite's TTL, and a lease that expired mid-race may be won again
	// legitimately; exclusion is what is tested here.
	ttl := 20 * e.ttl
	if m := e.store().Caps().MaxTTL; m > 0 {
		ttl = min(ttl, m)
	}
	start := make(chan struct{})
	type result struct {
		l   *lease.Lease
		err error
	}
	results := make(chan result, clients*perClient)
	var wg sync.WaitGroup
	for _, c := range cs {
		for range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				l, err := c.TryAcquire(e.ctx, key, lease.WithTTL(ttl))
				results <- result{l, err}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(results)
	var won []*lease.Lease
	for r := range results {
		switch {
		case r.err == nil && r.l != nil:
			won = append(won, r.l)
		case errors.Is(r.err, lease.ErrHeld):
		default:
			e.t.Errorf("TryAcquire in the race: lease %v, error %v; want a lease or ErrHeld", r.l, r.err)
		}
	}
	if len(won) != 1 {
		for _, l := range won {
			e.t.Logf("winner: fence %d, Err %v", l.Fence(), l.Err())
		}
		e.t.Fatalf("%d of %d racing TryAcquire calls won, want exactly 1", len(won), clients*perClient)
	}
	if info := e.inspect(e.store(), key); !info.Held || info.Fence != won[0].Fence() {
		e.t.Errorf("after the race: Inspect = %+v, want held with the winner's fence %d", info, won[0].Fence())
	}
}

// testFencesIncrease: successive holders, by release and by expiry, through
// different clients, get strictly increasing fences. The clients hold with
// a long TTL: a renewal late on a loaded machine (a ZooKeeper ensemble in
// CI, at 2 s) must not lose a lease between its grant and its release.
func testFencesIncrease(e *env) {
	s1, s2, s3 := e.store(), e.store(), e.store()
	cs := []*lease.Client{e.client(s1, lease.WithTTL(e.longTTL(s1))), e.client(s2, lease.WithTTL(e.longTTL(s2)))}
	key := e.key("fences")
	var last uint64
	next := func(how string, f uint64) {
		e.t.Helper()
		if f <= last {
			e.t.Errorf("fence after %s = %d, want > %d", how, f, last)
		}
		last = f
	}
	for i := range 4 {
		l := e.tryAcquire(cs[i%2], key)
		next("release", l.Fence())
		if err := l.Release(e.ctx); err != nil {
			e.t.Fatalf("Release: %v", err)
		}
	}
	// A holder that stops renewing (store level, no Client) and expires.
	_, g := e.storeAcquire(s3, key, "expiring", e.ttl)
	next("release", g.Fence)
	e.sleep(e.expiryWait())
	l := e.tryAcquire(cs[0], key)
	next("expiry", l.Fence())
	if err := l.Release(e.ctx); err != nil {
		e.t.Fatalf("Release: %v", err)
	}
	l = e.tryAcquire(cs[1], key)
	next("release", l.Fence())
}

// testHeartbeatKeeps: the heartbeat keeps a lease well past its TTL; Release
// ends it once.
func testHeartbeatKeeps(e *env) {
	s := e.store()
	ttl := e.heartbeatTTL(s) // renewals a second late must not lose it
	c1, c2 := e.client(s, lease.WithTTL(ttl)), e.client(e.store())
	key := e.key("heartbeat")
	l := e.tryAcquire(c1, key)
	fence := l.Fence()
	e.sleep(2*ttl + ttl/2)
	if err := l.Err(); err != nil {
		e.t.Fatalf("after 2.5 TTLs: Err() = %v, want nil (the heartbeat keeps the lease)", err)
	}
	if closed(l.Done()) {
		e.t.Fatalf("after 2.5 TTLs: Done() is closed")
	}
	if l.Fence() != fence {
		e.t.Errorf("Fence() changed from %d to %d while held", fence, l.Fence())
	}
	_, err := c2.TryAcquire(e.ctx, key)
	e.wantHeld(err, key, l.Holder(), fence)
	if err := l.Release(e.ctx); err != nil {
		e.t.Fatalf("Release: %v", err)
	}
	if err := l.Err(); !errors.Is(err, lease.ErrReleased) {
		e.t.Errorf("after Release: Err() = %v, want ErrReleased", err)
	}
	if !closed(l.Done()) || l.Context().Err() == nil {
		e.t.Errorf("after Release: the lease's Done/Context are not cancelled")
	}
	if err := l.Release(e.ctx); !errors.Is(err, lease.ErrReleased) {
		e.t.Errorf("second Release: %v, want ErrReleased", err)
	}
	l2 := e.tryAcquire(c2, key)
	if l2.Fence() <= fence {
		e.t.Errorf("next holder's fence %d, want > %d", l2.Fence(), fence)
	}
}

// testDo: Do runs fn while holding the key, returns fn's error and releases
// the key afterwards.
func testDo(e *env) {
	s := e.store()
	// Do releases at the end; a long TTL keeps a slow machine from losing
	// the lease while fn checks it.
	c, other := e.client(s, lease.WithTTL(e.longTTL(s))), e.client(e.store())
	key := e.key("do")
	errFn := errors.New("fn failed")
	var (
		ran   bool
		fnCtx context.Context
		held  *lease.Lease
	)
	err := c.Do(e.ctx, key, func(ctx context.Context, l *lease.Lease) error {
		ran, fnCtx, held = true, ctx, l
		if l == nil {
			e.t.Errorf("Do passed a nil lease")
			return errFn
		}
		if l.Key() != key || l.Fence() == 0 {
			e.t.Errorf("Do's lease: key %q fence %d, want key %q and a fence", l.Key(), l.Fence(), key)
		}
		if ctx.Err() != nil || l.Err() != nil || l.Context().Err() != nil {
			e.t.Errorf("inside Do: ctx.Err() = %v, lease Err() = %v, lease Context().Err() = %v; want all nil", ctx.Err(), l.Err(), l.Context().Err())
		}
		_, err := other.TryAcquire(e.ctx, key)
		e.wantHeld(err, key, l.Holder(), l.Fence())
		return errFn
	})
	if !ran || held == nil {
		e.t.Fatalf("Do did not run fn with a lease: %v", err)
	}
	if !errors.Is(err, errFn) {
		e.t.Errorf("Do returned %v, want fn's error", err)
	}
	if fnCtx.Err() == nil {
		e.t.Errorf("fn's ctx is not cancelled after Do returned (it must end with the lease)")
	}
	if !errors.Is(held.Err(), lease.ErrReleased) {
		e.t.Errorf("after Do: lease Err() = %v, want ErrReleased", held.Err())
	}
	l := e.tryAcquire(other, key)
	if l.Fence() <= held.Fence() {
		e.t.Errorf("fence after Do %d, want > %d", l.Fence(), held.Fence())
	}
	if err := l.Release(e.ctx); err != nil {
		e.t.Fatalf("Release: %v", err)
	}
	if err := c.Do(e.ctx, key, func(context.Context, *lease.Lease) error { return nil }); err != nil {
		e.t.Errorf("Do with fn returning nil: %v", err)
	}
}

// testCloseReleases: Client.Close releases every lease and refuses new ones.
func testCloseReleases(e *env) {
	c1, c2 := e.client(e.store()), e.client(e.store())
	keys := []string{e.key("close-a"), e.key("close-b"), e.key("close-c")}
	var ls []*lease.Lease
	for _, k := range keys {
		ls = append(ls, e.tryAcquire(c1, k))
	}
	if err := c1.Close(); err != nil {
		e.t.Errorf("Close: %v", err)
	}
	for _, l := range ls {
		if err := l.Err(); !errors.Is(err, lease.ErrReleased) {
			e.t.Errorf("after Close: lease %q Err() = %v, want ErrReleased", l.Key(), err)
		}
		if !closed(l.Done()) {
			e.t.Errorf("after Close: lease %q Done() is not closed", l.Key())
		}
	}
	for i, k := range keys {
		l := e.tryAcquire(c2, k)
		if l.Fence() <= ls[i].Fence() {
			e.t.Errorf("fence after Close %d, want > %d", l.Fence(), ls[i].Fence())
		}
	}
	if err := c1.Close(); err != nil && !errors.Is(err, lease.ErrClosed) {
		e.t.Errorf("second Close: %v, want nil or ErrClosed", err)
	}
	if l, err := c1.TryAcquire(e.ctx, e.key("after-close")); !errors.Is(err, lease.ErrClosed) || l != nil {
		e.t.Errorf("TryAcquire after Close: %v, %v; want ErrClosed", l, err)
	}
	if l, err := c1.Acquire(e.ctx, e.key("after-close")); !errors.Is(err, lease.ErrClosed) || l != nil {
		e.t.Errorf("Acquire after Close: %v, %v; want ErrClosed", l, err)
	}
}

// testInvalidInput: bad keys and options are rejected with ErrInvalid.
func testInvalidInput(e *env) {
	s := e.store()
	if c, err := lease.New(nil); !errors.Is(err, lease.ErrInvalid) || c != nil {
		e.t.Errorf("lease.New(nil) = %v, %v; want ErrInvalid", c, err)
	}
	c := e.client(s)
	maxLen := lease.MaxKeyLen
	if m := s.Caps().MaxKeyLen; m > 0 && m < maxLen {
		maxLen = m
	}
	longest := strings.Repeat("k", maxLen)
	if prefix := e.key("long") + "-"; len(prefix) < maxLen {
		longest = prefix + longest[len(prefix):]
	}
	cases := []struct {
		what string
		key  string
		opts []lease.AcquireOption
	}{
		{"empty key", "", nil},
		{"key one byte over the limit", longest + "k", nil},
		{"key over 512 bytes", strings.Repeat("k", lease.MaxKeyLen+1), nil},
		{"key with a NUL byte", e.key("nul") + "\x00x", nil},
		{"key not valid UTF-8", e.key("utf8") + "\xff", nil},
		{"TTL 1ms", e.key("ttl"), []lease.AcquireOption{lease.WithTTL(time.Millisecond)}},
		{"renew interval = TTL", e.key("renew"), []lease.AcquireOption{lease.WithTTL(e.ttl), lease.WithRenewInterval(e.ttl)}},
		{"renew interval > TTL", e.key("renew"), []lease.AcquireOption{lease.WithTTL(e.ttl), lease.WithRenewInterval(2 * e.ttl)}},
		{"holder over MaxHolderLen", e.key("holder"), []lease.AcquireOption{lease.WithHolder(strings.Repeat("h", lease.MaxHolderLen+1))}},
	}
	for _, tc := range cases {
		if l, err := c.TryAcquire(e.ctx, tc.key, tc.opts...); !errors.Is(err, lease.ErrInvalid) || l != nil {
			e.t.Errorf("TryAcquire with %s: %v, %v; want ErrInvalid", tc.what, l, err)
		}
		if l, err := c.Acquire(e.ctx, tc.key, tc.opts...); !errors.Is(err, lease.ErrInvalid) || l != nil {
			e.t.Errorf("Acquire with %s: %v, %v; want ErrInvalid", tc.what, l, err)
		}
		ran := false
		err := c.Do(e.ctx, tc.key, func(context.Context, *lease.Lease) error { ran = true; return nil }, tc.opts...)
		if !errors.Is(err, lease.ErrInvalid) || ran {
			e.t.Errorf("Do with %s: %v (fn ran: %v); want ErrInvalid without running fn", tc.what, err, ran)
		}
	}
	// The longest valid key works.
	l := e.tryAcquire(c, longest)
	if err := l.Release(e.ctx); err != nil {
		e.t.Errorf("Release of the longest key: %v", err)
	}
}

// testBatchRenew: one client keeps 20 leases through several TTLs, in one
// round trip per renewal when the store is a driver.BatchRenewer: the calls
// that reach the store are counted.
func testBatchRenew(e *env) {
	inner := e.store()
	_, batch := inner.(driver.BatchRenewer)
	s := Faulty(inner)
	// A TTL whose renewals tolerate a second of scheduling delay: this test
	// is about 20 leases renewed together, not about a busy machine.
	ttl := e.heartbeatTTL(inner)
	c := e.client(s, lease.WithTTL(ttl))
	ls := make([]*lease.Lease, 20)
	for i := range ls {
		ls[i] = e.tryAcquire(c, e.key("batch"))
	}
	e.sleep(2 * ttl)
	other := e.store()
	for _, l := range ls {
		if err := l.Err(); err != nil {
			e.t.Errorf("lease %q after 2 TTLs: Err() = %v, want nil", l.Key(), err)
			continue
		}
		if info := e.inspect(other, l.Key()); !info.Held || info.Fence != l.Fence() {
			e.t.Errorf("lease %q after 2 TTLs: Inspect = %+v, want held with fence %d", l.Key(), info, l.Fence())
		}
	}
	renewals, calls := s.Renewals(), s.RenewCalls()
	e.t.Logf("%d renewals in %d calls", renewals, calls)
	if renewals < int64(len(ls)) {
		e.t.Errorf("%d renewals of %d leases in 2 TTLs, want at least one each", renewals, len(ls))
	}
	if !batch {
		e.t.Skipf("lacks capability driver.BatchRenewer: leases are renewed one by one")
	}
	// Leases acquired together are renewed together: on average at least
	// four per call (20 per call when nothing is late).
	if calls*4 > renewals {
		e.t.Errorf("%d renewals in %d calls: the store is a driver.BatchRenewer, want several leases per call", renewals, calls)
	}
}

// testInspect: Inspect reports held, free and released keys.
func testInspect(e *env) {
	holder := "inspected-" + randHex(4)
	s, other := e.store(), e.store()
	c := e.client(s, lease.WithHolder(holder))
	key := e.key("inspect")
	l := e.tryAcquire(c, key)
	info := e.inspect(other, key)
	if !info.Held || info.Fence != l.Fence() {
		e.t.Errorf("held key: Inspect = %+v, want held with fence %d", info, l.Fence())
	}
	if info.Key != key {
		e.t.Errorf("held key: Inspect.Key = %q, want %q", info.Key, key)
	}
	if info.Holder != "" && info.Holder != holder {
		e.t.Errorf("held key: Inspect.Holder = %q, want %q", info.Holder, holder)
	}
	if info.Remaining < 0 || info.Remaining > e.ttl+e.ttl/10 {
		e.t.Errorf("held key: Inspect.Remaining = %v, want within [0, %v]", info.Remaining, e.ttl)
	}
	if ci, err := c.Inspect(e.ctx, key); err != nil || !ci.Held || ci.Fence != l.Fence() {
		e.t.Errorf("Client.Inspect = %+v, %v; want held with fence %d", ci, err, l.Fence())
	}
	free := e.key("free")
	if info := e.inspect(other, free); info.Held || info.Holder != "" || info.Remaining != 0 {
		e.t.Errorf("free key: Inspect = %+v, want not held", info)
	}
	if err := l.Release(e.ctx); err != nil {
		e.t.Fatalf("Release: %v", err)
	}
	if info := e.inspect(other, key); info.Held || info.Holder != "" || info.Remaining != 0 {
		e.t.Errorf("released key: Inspect = %+v, want not held", info)
	}
}

// panicValue is what the panic subtests' functions panic with: a pointer, so
// that only the very value is recognised.
type panicValue struct{ where string }

// catch calls f and returns what it panicked with (nil if it returned).
func catch(f func()) (recovered any) {
	defer func() { recovered = recover() }()
	f()
	return nil
}

// testDoPanic: when Do's fn panics, Do releases the key (and stops renewing
// it) before the panic goes on, with its original value, to a caller that
// recovers (as net/http does).
func testDoPanic(e *env) {
	c, other := e.client(e.store()), e.client(e.store())
	key := e.key("do-panic")
	want := &panicValue{"Do"}
	var held *lease.Lease
	got := catch(func() {
		_ = c.Do(e.ctx, key, func(_ context.Context, l *lease.Lease) error {
			held = l
			panic(want)
		})
	})
	if got != want {
		e.t.Fatalf("Do's caller recovered %v, want fn's panic value %v", got, want)
	}
	if held == nil {
		e.t.Fatalf("Do did not run fn")
	}
	if err := held.Err(); !errors.Is(err, lease.ErrReleased) {
		e.t.Errorf("after fn panicked: lease Err() = %v, want ErrReleased", err)
	}
	if !closed(held.Done()) {
		e.t.Errorf("after fn panicked: the lease's Done is not closed")
	}
	// Another client gets the key at once: it was released, not left to expire.
	l, err := other.TryAcquire(e.ctx, key)
	if err != nil {
		e.t.Fatalf("TryAcquire by another client after Do's fn panicked: %v (the key was not released)", err)
	}
	if l.Fence() <= held.Fence() {
		e.t.Errorf("fence after the panic %d, want > %d", l.Fence(), held.Fence())
	}
}

// wantOwn checks that err says key is held by this very client, by the
// lease l.
func (e *env) wantOwn(err error, what string, l *lease.Lease) {
	e.t.Helper()
	var he *lease.HeldError
	if !errors.Is(err, lease.ErrHeld) || !errors.As(err, &he) {
		e.t.Errorf("%s: error = %v, want a *lease.HeldError matching lease.ErrHeld", what, err)
		return
	}
	if !he.Self || he.Key != l.Key() || he.Fence != l.Fence() || he.Holder != l.Holder() {
		e.t.Errorf("%s: HeldError = %+v, want Self with key %q, fence %d, holder %q", what, *he, l.Key(), l.Fence(), l.Holder())
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		e.t.Errorf("%s: error %v matches a ctx error: it must not wait for its ctx", what, err)
	}
}

// testAcquireOwnKey: a Client asking for a key it holds is refused at once,
// told that it is its own (leases are not reentrant), and the lease it holds
// is untouched; a semaphore's holder may still take more of its slots.
func testAcquireOwnKey(e *env) {
	holder := "own-" + randHex(4)
	c, other := e.client(e.store(), lease.WithHolder(holder)), e.client(e.store())
	key := e.key("own")
	l := e.tryAcquire(c, key)

	l2, err := c.TryAcquire(e.ctx, key)
	if l2 != nil {
		e.t.Fatalf("TryAcquire of a key the client holds returned a second lease (fence %d)", l2.Fence())
	}
	e.wantOwn(err, "TryAcquire of a key the client holds", l)

	// Acquire must not wait: before, it waited for its ctx to end.
	timeout := 20 * e.ttl
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	start := time.Now()
	l2, err = c.Acquire(ctx, key)
	took := time.Since(start)
	cancel()
	if l2 != nil {
		e.t.Fatalf("Acquire of a key the client holds returned a second lease (fence %d)", l2.Fence())
	}
	e.wantOwn(err, "Acquire of a key the client holds", l)
	if took > timeout/2 {
		e.t.Errorf("Acquire of a key the client holds took %v, want at once (its ctx allowed %v)", took, timeout)
	}
	ran := false
	err = c.Do(e.ctx, key, func(context.Context, *lease.Lease) error { ran = true; return nil })
	if ran {
		e.t.Errorf("Do ran fn on a key the client already holds")
	}
	e.wantOwn(err, "Do on a key the client holds", l)

	// The lease is untouched, and still the store's holder.
	if err := l.Err(); err != nil {
		e.t.Errorf("the held lease's Err() = %v after the refused attempts, want nil", err)
	}
	_, err = other.TryAcquire(e.ctx, key)
	e.wantHeld(err, key, holder, l.Fence())
	var he *lease.HeldError
	if errors.As(err, &he) && he.Self {
		e.t.Errorf("another client's HeldError has Self set: %+v", *he)
	}
	if err := l.Release(e.ctx); err != nil {
		e.t.Fatalf("Release: %v", err)
	}
	l3 := e.tryAcquire(c, key)
	if l3.Fence() <= l.Fence() {
		e.t.Errorf("fence after re-acquiring %d, want > %d", l3.Fence(), l.Fence())
	}

	// A semaphore's slots are separate leases: one client may hold several.
	sem := e.key("own-sem")
	s1, err := c.TrySemaphore(e.ctx, sem, 2)
	if err != nil {
		e.t.Fatalf("TrySemaphore: %v", err)
	}
	ctx, cancel = context.WithTimeout(e.ctx, timeout)
	s2, err := c.AcquireSemaphore(ctx, sem, 2)
	cancel()
	if err != nil {
		e.t.Fatalf("AcquireSemaphore of a second slot by the holder of the first: %v", err)
	}
	if s1.Key() == s2.Key() {
		e.t.Errorf("both slot leases are on %q", s1.Key())
	}
	if _, err := c.TrySemaphore(e.ctx, sem, 2); !errors.Is(err, lease.ErrHeld) {
		e.t.Errorf("TrySemaphore with both slots held by this client: %v, want ErrHeld", err)
	}
}
