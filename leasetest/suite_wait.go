// Waiting subtests of the conformance suite: Acquire waits for a release or
// an expiry, and gives up when its ctx ends without leaving a lease behind.

package leasetest

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// acquired is the outcome of an Acquire run in the background.
type acquired struct {
	l   *lease.Lease
	err error
	at  time.Time
}

// acquireAsync runs c.Acquire(ctx, key) in a goroutine.
func acquireAsync(ctx context.Context, c *lease.Client, key string) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := c.Acquire(ctx, key)
		ch <- acquired{l, err, time.Now()}
	}()
	return ch
}

// await waits up to d for an acquisition.
func (e *env) await(ch <-chan acquired, d time.Duration) acquired {
	e.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		e.t.Fatalf("Acquire did not return within %v", d)
	case <-e.ctx.Done():
		e.t.Fatalf("subtest deadline: %v", e.ctx.Err())
	}
	return acquired{}
}

// testWaitAcquire: Acquire waits while the key is held and acquires once the
// holder releases it (promptly when the store announces releases).
func testWaitAcquire(e *env) {
	sa, sb := e.store(), e.store()
	ca, cb := e.client(sa), e.client(sb)
	key := e.key("wait")
	la := e.tryAcquire(ca, key, lease.WithTTL(4*e.ttl))
	ch := acquireAsync(e.ctx, cb, key)
	e.sleep(e.ttl / 2)
	select {
	case r := <-ch:
		e.t.Fatalf("Acquire returned while the key was held: %v, %v", r.l, r.err)
	default:
	}
	released := time.Now()
	if err := la.Release(e.ctx); err != nil {
		e.t.Fatalf("Release: %v", err)
	}
	_, notifier := sb.(driver.Notifier)
	bound := 4*e.ttl + e.ttl + time.Second // the holder's TTL, then a margin
	if notifier {
		bound = e.ttl
	}
	r := e.await(ch, bound+time.Second)
	if r.err != nil {
		e.t.Fatalf("Acquire: %v", r.err)
	}
	wait := r.at.Sub(released)
	e.t.Logf("acquired %v after the release (store is a Notifier: %v)", wait.Round(time.Millisecond), notifier)
	if wait > bound {
		e.t.Errorf("acquired %v after the release, want within %v (store is a Notifier: %v)", wait, bound, notifier)
	}
	if r.l.Fence() <= la.Fence() {
		e.t.Errorf("waiter's fence %d, want > %d", r.l.Fence(), la.Fence())
	}
	if err := r.l.Err(); err != nil {
		e.t.Errorf("waiter's lease Err() = %v, want nil", err)
	}
}

// testWaitExpiry: Acquire waits for a holder that stops renewing to expire.
func testWaitExpiry(e *env) {
	sa, sb := e.store(), e.store()
	cb := e.client(sb)
	key := e.key("waitexp")
	start := time.Now()
	_, ga := e.storeAcquire(sa, key, "a", e.ttl)
	ch := acquireAsync(e.ctx, cb, key)
	bound := 3 * e.ttl
	r := e.await(ch, bound+time.Second)
	if r.err != nil {
		e.t.Fatalf("Acquire: %v", r.err)
	}
	wait := r.at.Sub(start)
	e.t.Logf("acquired %v after the holder's acquire (TTL %v)", wait.Round(time.Millisecond), e.ttl)
	if wait < e.ttl*9/10 {
		e.t.Errorf("acquired %v after the holder's acquire, before its TTL %v ran out", wait, e.ttl)
	}
	if wait > bound {
		e.t.Errorf("acquired %v after the holder's acquire, want within %v", wait, bound)
	}
	if r.l.Fence() <= ga.Fence {
		e.t.Errorf("waiter's fence %d, want > %d", r.l.Fence(), ga.Fence)
	}
}

// testCtxCancel: Acquire and TryAcquire give up when their ctx ends, and
// leave no lease behind.
func testCtxCancel(e *env) {
	sa, sb := e.store(), e.store()
	ca, cb := e.client(sa), e.client(sb)
	key := e.key("cancel")
	la := e.tryAcquire(ca, key)

	timeout := e.ttl / 2
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	start := time.Now()
	l, err := cb.Acquire(ctx, key)
	took := time.Since(start)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || l != nil {
		e.t.Errorf("Acquire with a %v timeout on a held key: %v, %v; want context.DeadlineExceeded", timeout, l, err)
	}
	// Past its ctx, Acquire finishes the store call in flight and, on a FIFO
	// store, leaves the queue: each within a grace of min(TTL/3, 1s).
	grace := min(e.ttl/3, time.Second)
	if late := timeout + 2*grace + time.Second; took < timeout*9/10 || took > late {
		e.t.Errorf("Acquire with a %v timeout returned after %v, want %v to %v", timeout, took, timeout*9/10, late)
	}

	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()
	free := e.key("cancel-free")
	for _, k := range []string{key, free} {
		start = time.Now()
		l, err = cb.Acquire(cancelled, k)
		if !errors.Is(err, context.Canceled) || l != nil {
			e.t.Errorf("Acquire(%q) with a cancelled ctx: %v, %v; want context.Canceled", k, l, err)
		}
		l, err = cb.TryAcquire(cancelled, k)
		if !errors.Is(err, context.Canceled) || l != nil {
			e.t.Errorf("TryAcquire(%q) with a cancelled ctx: %v, %v; want context.Canceled", k, l, err)
		}
		if d := time.Since(start); d > time.Second {
			e.t.Errorf("Acquire and TryAcquire with a cancelled ctx took %v", d)
		}
	}

	// No orphan: the held key is still A's, the free key is still free.
	if info := e.inspect(sb, key); !info.Held || info.Fence != la.Fence() {
		e.t.Errorf("after the cancelled attempts: Inspect(held key) = %+v, want held with fence %d", info, la.Fence())
	}
	if info := e.inspect(sb, free); info.Held {
		e.t.Errorf("after the cancelled attempts: Inspect(free key) = %+v, want not held", info)
	}
	if err := la.Err(); err != nil {
		e.t.Errorf("holder's Err() = %v, want nil", err)
	}
	if err := la.Release(e.ctx); err != nil {
		e.t.Fatalf("holder's Release: %v", err)
	}
	lb := e.tryAcquire(cb, key)
	if lb.Fence() <= la.Fence() {
		e.t.Errorf("fence after the holder's release %d, want > %d", lb.Fence(), la.Fence())
	}
}

// wantGaveUp checks that err, from an acquisition of key that gave up when
// its ctx ended with cause, says so and who held the key: it matches both
// cause and lease.ErrHeld, and its *lease.HeldError names the holder and
// fence (when the store tells) and a wait of about waited.
func (e *env) wantGaveUp(err, cause error, key, holder string, fence uint64, waited time.Duration) {
	e.t.Helper()
	if !errors.Is(err, cause) || !errors.Is(err, lease.ErrHeld) {
		e.t.Errorf("error = %v, want one matching %v and lease.ErrHeld", err, cause)
		return
	}
	e.wantHeld(err, key, holder, fence)
	var he *lease.HeldError
	if !errors.As(err, &he) {
		return
	}
	if he.Self {
		e.t.Errorf("HeldError.Self is set for another client's key: %+v", *he)
	}
	if he.Waited < waited*9/10 || he.Waited > waited+10*time.Second {
		e.t.Errorf("HeldError.Waited = %v, want about %v", he.Waited, waited)
	}
	msg := err.Error()
	for _, want := range []string{"gave up after", key, cause.Error()} {
		if !strings.Contains(msg, want) {
			e.t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if he.Holder != "" && !strings.Contains(msg, he.Holder) {
		e.t.Errorf("error %q does not name the holder %q", msg, he.Holder)
	}
}

// testAcquireGiveUp: an Acquire (or AcquireSemaphore) that gives up when its
// ctx ends on a held key returns an error matching both the ctx's error and
// lease.ErrHeld, saying who held the key and how long it waited, and emits
// an EventAcquireFailed with that error.
func testAcquireGiveUp(e *env) {
	holder := "giveup-holder-" + randHex(4)
	sa := e.store()
	ca := e.client(sa, lease.WithHolder(holder))
	fb := e.faulty()
	rec := &Recorder{}
	cb := e.client(fb, lease.WithObserver(rec))
	key := e.key("giveup")
	// The holder's leases must outlast a busy machine's late renewals: this
	// test is about the waiter, not about losing.
	long := lease.WithTTL(e.longTTL(sa))
	la := e.tryAcquire(ca, key, long)

	// A deadline, long enough for the store to refuse a first attempt.
	timeout := e.ttl
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	l, err := cb.Acquire(ctx, key)
	cancel()
	if l != nil {
		e.t.Fatalf("Acquire of a held key returned a lease (fence %d)", l.Fence())
	}
	e.wantGaveUp(err, context.DeadlineExceeded, key, holder, la.Fence(), timeout)
	ev, _, ok := rec.Find(0, 5*time.Second, Kind(key, lease.EventAcquireFailed))
	switch {
	case !ok:
		e.t.Errorf("no EventAcquireFailed for the Acquire that timed out")
	case ev.Err != err:
		e.t.Errorf("EventAcquireFailed.Err = %v, want the error Acquire returned (%v)", ev.Err, err)
	case ev.Wait < timeout*9/10:
		e.t.Errorf("EventAcquireFailed.Wait = %v, want about %v", ev.Wait, timeout)
	}

	// A cancellation, once the store has refused the first attempt.
	ctx, cancel = context.WithCancel(e.ctx)
	before := fb.Acquires()
	ch := acquireAsync(ctx, cb, key)
	e.waitAcquires(fb, before+1)
	start := time.Now() // Acquire started before this
	e.waitAcquires(fb, before+2)
	e.sleep(e.ttl / 10)
	waited := time.Since(start)
	cancel()
	r := e.await(ch, closeWait)
	if r.l != nil {
		e.t.Fatalf("cancelled Acquire of a held key returned a lease (fence %d)", r.l.Fence())
	}
	e.wantGaveUp(r.err, context.Canceled, key, holder, la.Fence(), waited)

	// A semaphore whose one slot is held.
	sem := e.key("giveup-sem")
	if _, err := ca.TrySemaphore(e.ctx, sem, 1, long); err != nil {
		e.t.Fatalf("TrySemaphore: %v", err)
	}
	ctx, cancel = context.WithTimeout(e.ctx, timeout)
	l, err = cb.AcquireSemaphore(ctx, sem, 1)
	cancel()
	if l != nil {
		e.t.Fatalf("AcquireSemaphore of a full semaphore returned a lease (fence %d)", l.Fence())
	}
	e.wantGaveUp(err, context.DeadlineExceeded, sem, "", 0, timeout)
}

// waitAcquires waits until fs has seen n Acquire calls; when it is given a
// second, the first has returned.
func (e *env) waitAcquires(fs *FaultyStore, n int64) {
	e.t.Helper()
	deadline := time.Now().Add(closeWait)
	for fs.Acquires() < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("the store saw %d Acquire calls in %v, want %d", fs.Acquires(), closeWait, n)
		}
		time.Sleep(time.Millisecond)
	}
}
