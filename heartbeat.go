package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease/driver"
)

// The heartbeat: one goroutine per Client wakes at the earliest renewal time
// or local deadline of all its leases, declares lost every lease whose
// deadline has passed, and starts renewals for the leases that are due. The
// renewals themselves run in their own goroutines, so a store call that hangs
// can never delay a loss: losses are decided here, by the clock alone.

// The causes of a LossDeadline when no renewal error was seen, and of a
// LossMaxHold.
var (
	errDeadline = errors.New("no successful renewal before the local deadline")
	errMaxHold  = errors.New("held for the maximum hold time (WithMaxHold)")
)

// deadlineCause is the cause of l's LossDeadline, with the last renewal
// error if any; c.mu is held.
func (l *Lease) deadlineCause() error {
	if l.failures > 0 {
		return fmt.Errorf("%w; last renewal error: %w", errDeadline, l.lastFailure)
	}
	return errDeadline
}

func (c *Client) heartbeat() {
	for {
		next := c.tick()
		before := c.clock.Now()
		t := c.clock.NewTimer(max(next.Sub(before), 0))
		if c.clock.Now().Sub(before) > time.Millisecond {
			// The clock jumped while the timer was armed (a fake clock
			// advanced, or this goroutine was descheduled): the timer may
			// be late by the jump, so plan again.
			t.Stop()
			continue
		}
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-c.wake:
			t.Stop()
		case <-t.C():
		}
	}
}

// kickLocked wakes the heartbeat if at comes before the wake it planned (a
// lease was added, or a renewal failed and is retried soon); c.mu is held.
// Waking it on every change would make each wake scan every lease: O(n²).
func (c *Client) kickLocked(at time.Time) {
	if at.Before(c.wakeAt) {
		c.wakeAt = at
		signal(c.wake)
	}
}

// signal sends on ch, a channel of capacity 1, unless it is full.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// tick does one round of the heartbeat and returns when to wake next.
func (c *Client) tick() time.Time {
	now := c.clock.Now()
	// Even without leases, wake once per default renew interval: a lease
	// acquired meanwhile (with the default settings) is then due no earlier
	// than the planned wake, and its acquisition need not wake the
	// heartbeat (a goroutine switch and a new timer per acquisition).
	next := now.Add(c.idle)
	var due, lost []*Lease
	var evs []Event

	c.mu.Lock()
	// Once one lease is due, every lease renewed at least a third of its
	// interval ago joins the same round: the renewal times of all leases
	// converge, so the heartbeat wakes about once per renew interval however
	// many leases it holds, and a batching store renews them all in one round
	// trip.
	align := false
	for l := range c.leases {
		if l.inflight == nil && !l.p.manual && !now.Before(l.nextRenew) {
			align = true
			break
		}
	}
	for l := range c.leases {
		if !l.giveUp.IsZero() && !now.Before(l.giveUp) {
			evs = append(evs, c.loseLocked(l, LossMaxHold, errMaxHold))
			lost = append(lost, l)
			continue
		}
		if !now.Before(l.deadline) {
			evs = append(evs, c.loseLocked(l, LossDeadline, l.deadlineCause()))
			lost = append(lost, l)
			continue
		}
		if l.deadline.Before(next) {
			next = l.deadline
		}
		if !l.giveUp.IsZero() && l.giveUp.Before(next) {
			next = l.giveUp
		}
		if l.inflight != nil || l.p.manual {
			continue
		}
		at := l.nextRenew
		if align && l.failures == 0 {
			at = l.lastRenew.Add(l.p.renew / 3)
		}
		if !now.Before(at) {
			l.inflight = make(chan struct{})
			due = append(due, l)
			continue
		}
		if l.nextRenew.Before(next) {
			next = l.nextRenew
		}
	}
	c.wakeAt = next
	c.unlockEmit(evs...)

	reqs := make([]driver.Request, len(lost))
	for i, l := range lost {
		reqs[i] = l.req
	}
	c.cleanupAll(reqs)
	if len(due) > 0 {
		c.renew(now, due)
	}
	return next
}

// renew renews due leases in the background: one round trip for all of them
// with a batching store, one call per lease otherwise.
func (c *Client) renew(sent time.Time, due []*Lease) {
	// No later than the earliest deadline (the leases are lost then anyway),
	// no longer than a renew interval (a hung call leaves time to retry).
	// The most urgent first: a call cut short by the timeout then fails the
	// leases with the most time left to retry.
	slices.SortFunc(due, func(a, b *Lease) int { return a.deadline.Compare(b.deadline) })
	left, interval := due[0].deadline.Sub(sent), due[0].p.renew
	for _, l := range due {
		interval = min(interval, l.p.renew)
	}
	timeout := max(min(left, interval), time.Millisecond)
	if c.batch != nil && len(due) > 1 {
		// A round's time grows with its size: 100,000 leases on a busy
		// PostgreSQL take about an interval. A round a little slower must
		// not fail whole (and its retry, with less time, fail again): a
		// batch may run until half an interval before the earliest
		// deadline, time enough for one retry if it hangs.
		c.renewBatch(sent, due, max(timeout, left-interval/2), interval)
		return
	}
	// One call per lease, by a few workers: a round can hold thousands.
	deadline := time.Now().Add(timeout)
	c.spawnEach(len(due), renewWorkers, func(i int) {
		l := due[i]
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := c.store.Renew(ctx, l.req)
		cancel()
		c.renewed(sent, []*Lease{l}, []error{err})
	})
}

// spawnEach runs f(0) to f(n-1) on at most workers goroutines of c.
func (c *Client) spawnEach(n, workers int, f func(i int)) {
	var next atomic.Int64
	for range min(n, workers) {
		c.spawn(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
}

// renewBatch renews due in one RenewMany call, or, while the store is slow,
// in calls of at most c.piece leases, most urgent first, pieceWorkers at a
// time; each call's leases are renewed as soon as it returns, so a round too
// slow for its limit fails only the calls it cut short (docs/design.md,
// "Slow rounds").
func (c *Client) renewBatch(sent time.Time, due []*Lease, limit, interval time.Duration) {
	c.mu.Lock()
	piece := c.piece
	c.mu.Unlock()
	size := len(due)
	if piece > 0 {
		size = min(size, piece)
	}
	calls := slices.Collect(slices.Chunk(due, size))
	deadline := time.Now().Add(limit)
	c.spawnEach(len(calls), pieceWorkers, func(i int) {
		ls := calls[i]
		reqs := make([]driver.Request, len(ls))
		for j, l := range ls {
			reqs[j] = l.req
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		start := time.Now()
		errs := c.batch.RenewMany(ctx, reqs)
		took := time.Since(start)
		cancel()
		if len(errs) != len(reqs) {
			errs = slices.Repeat([]error{errors.New("lease: store's RenewMany returned the wrong number of results")}, len(reqs))
		}
		c.resize(piece, len(ls), len(due), took, interval)
		c.renewed(sent, ls, errs)
	})
}

// resize sets the size of the next rounds' calls from a call of k leases,
// in a round of n sent in calls of piece (0: one call), that took took. A
// call slower than a renew interval (two thirds of a round's usual limit,
// one and a half intervals at the default TTL) bounds the calls to the
// leases it would renew in a quarter of one; a call under a quarter doubles
// them back, until a round is one call. The interval, not the call's
// limit, is the measure: a retry close to the deadline has little time
// whatever its size.
func (c *Client) resize(piece, k, n int, took, interval time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case took > interval:
		fit := max(int(float64(k)*float64(interval)/float64(4*took)), minPiece)
		if c.piece == 0 || fit < c.piece {
			c.piece = fit
		}
	case took < interval/4 && piece > 0 && c.piece == piece: // once per round
		if c.piece *= 2; c.piece >= n {
			c.piece = 0
		}
	}
}

// pieceWorkers bounds the concurrent calls of a round split by resize: more
// than one keeps a server with idle cores busy, few enough that the calls
// still return one after another, not all at the limit.
const pieceWorkers = 2

// minPiece is the smallest call resize asks for: under load a call has a
// fixed cost (PostgreSQL: about 0.1 s waiting for a pooled connection), which
// smaller calls would pay for too few leases.
const minPiece = 1000

// renewWorkers bounds the concurrent Renew calls of one round with a store
// that cannot batch.
const renewWorkers = 16

// renewed applies the results of a renewal sent at sent.
func (c *Client) renewed(sent time.Time, ls []*Lease, errs []error) {
	now := c.clock.Now()
	// EventRenewed goes to the observers alone (the recent-events ring
	// skips it): without observers a round builds none, and with them the
	// slice is sized once (a round of 100,000 renewals is 100,000 events).
	renewedEvents := len(c.obs) > 0
	var evs []Event
	if renewedEvents {
		evs = make([]Event, 0, len(ls))
	}
	// The leases a call failed to renew retry together, at one jittered
	// time per failure count and renew interval: one call again, not a call
	// per lease.
	retryAt := map[[2]time.Duration]time.Time{}
	c.mu.Lock()
	for i, l := range ls {
		close(l.inflight)
		l.inflight = nil
		if l.err != nil {
			continue
		}
		switch err := errs[i]; {
		case err == nil:
			l.failures, l.lastRenew, l.latency = 0, sent, now.Sub(sent)
			l.deadline, l.nextRenew = sent.Add(l.p.ttl-l.p.drift), sent.Add(l.p.renew)
			c.kickLocked(l.nextRenew)
			if renewedEvents {
				ev := l.event(EventRenewed, now)
				ev.Latency = l.latency
				evs = append(evs, ev)
			}
		case errors.Is(err, ErrBroken):
			evs = append(evs, c.loseLocked(l, LossBroken, err))
		case errors.Is(err, ErrNotHeld):
			evs = append(evs, c.loseLocked(l, LossNotHeld, err))
		default:
			l.failures, l.lastFailure = l.failures+1, err
			k := [2]time.Duration{time.Duration(l.failures), l.p.renew}
			if retryAt[k].IsZero() {
				retryAt[k] = now.Add(backoff(l.failures, l.p.renew))
			}
			l.nextRenew = retryAt[k]
			c.kickLocked(l.nextRenew)
			ev := l.event(EventRenewFailed, now)
			ev.Err = err
			evs = append(evs, ev)
			c.log.Warn("lease: renewal failed, retrying until the deadline", "key", l.req.Key, "err", err,
				"failures", l.failures, "deadline_in", l.deadline.Sub(now))
		}
	}
	c.unlockEmit(evs...)
}

// backoff returns the wait before retry number n (from 1) of an operation
// whose natural period is period: quick at first, doubling, capped at half a
// period, with jitter.
func backoff(n int, period time.Duration) time.Duration {
	base := max(period/16, time.Millisecond)
	d := min(base<<min(n-1, 10), max(period/2, time.Millisecond))
	return d/2 + jitter(d/2)
}
