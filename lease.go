package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/leasekit/lease/driver"
)

// Lease is one held lease, renewed by its Client until it is released or
// lost. Stop work when Done closes; pass Fence with writes.
type Lease struct {
	c     *Client
	req   driver.Request
	p     params
	fence uint64
	id    uint64 // Event.ID

	// Guarded by c.mu.
	err error // nil while held
	// ctx is made by the first Context or Done (most leases are released
	// without either, and a context costs allocations); cancel ends it
	// with err.
	ctx         context.Context
	cancel      context.CancelCauseFunc
	acquired    time.Time     // send time of the acquisition
	lastRenew   time.Time     // send time of the last successful acquire/renew
	latency     time.Duration // round trip of the last successful renewal
	deadline    time.Time     // lastRenew + TTL - drift: lost at this instant
	nextRenew   time.Time     // when the heartbeat renews next
	failures    int           // consecutive failed renewals
	lastFailure error         // the last renewal error
	inflight    chan struct{} // non-nil while a renewal is in flight; closed after
	watch       *lostWatch    // the watch of its Grant.Lost channel, if any
	giveUp      time.Time     // lost at this instant (WithMaxHold); zero: never
	holds       int           // re-entries (WithReentrant) not released yet
}

// newLease returns a lease whose TTL started at from.
func newLease(c *Client, req driver.Request, p params, fence uint64, from time.Time) *Lease {
	l := &Lease{
		c: c, req: req, p: p, fence: fence, id: c.ids.Add(1),
		lastRenew: from, deadline: from.Add(p.ttl - p.drift), nextRenew: from.Add(p.renew),
	}
	if p.maxHold > 0 {
		l.giveUp = from.Add(p.maxHold)
	}
	return l
}

// Key returns the lease's key.
func (l *Lease) Key() string { return l.req.Key }

// Token returns the holder's unique random token.
func (l *Lease) Token() string { return l.req.Token }

// Holder returns the holder's identity.
func (l *Lease) Holder() string { return l.p.holder }

// TTL returns the lease's TTL (see Extend).
func (l *Lease) TTL() time.Duration {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.p.ttl
}

// Shared reports whether the lease is a reader's shared hold
// (Client.AcquireShared).
func (l *Lease) Shared() bool { return l.req.Shared }

// Fence returns the fencing token (see the package doc).
func (l *Lease) Fence() uint64 { return l.fence }

// Context returns a context cancelled when the lease is lost or released,
// with Err as its cause.
func (l *Lease) Context() context.Context {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		if l.err != nil {
			l.cancel(l.err)
		}
	}
	return l.ctx
}

// Done is closed when the lease is lost or released.
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// endLocked ends l's context, if one was made, with cause; the caller
// holds c.mu.
func (l *Lease) endLocked(cause error) {
	if l.cancel != nil {
		l.cancel(cause)
	}
}

// Err returns nil while the lease is held, then a *LostError or ErrReleased.
func (l *Lease) Err() error {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.err
}

// Remaining returns the time until the local deadline (the send time of the
// last renewal + TTL - drift margin), 0 once the lease is lost or released.
func (l *Lease) Remaining() time.Duration {
	now := l.c.clock.Now()
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if l.err != nil {
		return 0
	}
	return max(l.deadline.Sub(now), 0)
}

// Release frees the key in the store if it still holds this token (of a
// reentrant lease, once every hold was released). The error matches
// ErrReleased for a second Release, ErrLost for a lost lease, ErrNotHeld if
// the store no longer had the token.
func (l *Lease) Release(ctx context.Context) error {
	c := l.c
	began := c.clock.Now()
	c.mu.Lock()
	if err := l.err; err != nil {
		c.mu.Unlock()
		return fmt.Errorf("lease: release %q: %w", l.req.Key, err)
	}
	if l.holds > 0 {
		l.holds--
		c.mu.Unlock()
		return nil
	}
	l.err = ErrReleased
	c.forgetLocked(l)
	c.unwatchLostLocked(l)
	inflight, deadline := l.inflight, l.deadline
	l.endLocked(ErrReleased)
	c.mu.Unlock()
	if inflight != nil {
		select {
		case <-inflight:
		case <-ctx.Done():
		}
	}
	err := c.releaseStore(ctx, l.req, deadline)
	c.mu.Lock()
	ev := l.event(EventReleased, c.clock.Now())
	ev.Latency, ev.Err, ev.Context = ev.Time.Sub(began), err, ctx
	c.unlockEmit(ev)
	if err != nil {
		return fmt.Errorf("lease: release %q: %w", l.req.Key, err)
	}
	if c.log.Enabled(ctx, slog.LevelDebug) { // the arguments cost allocations
		c.log.Debug("lease: released", "key", l.req.Key, "fence", l.fence)
	}
	return nil
}

// releaseStore deletes req's token from the store, retrying transient errors
// until ctx ends or the lease's deadline passes (the store then frees it).
func (c *Client) releaseStore(ctx context.Context, req driver.Request, deadline time.Time) error {
	for attempt := 1; ; attempt++ {
		err := c.storeRelease(ctx, req)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrNotHeld):
			return fmt.Errorf("it had expired or was taken over: %w", err)
		case errors.Is(err, ErrInvalid), ctx.Err() != nil, !c.clock.Now().Before(deadline):
			return err
		}
		wait := backoff(attempt, req.TTL)
		c.log.Warn("lease: release failed, retrying", "key", req.Key, "err", err, "retry_in", wait)
		t := c.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (after %v)", ctx.Err(), err)
		case <-t.C():
		}
	}
}

// loseAll marks the leases of ls that are still held lost for reason; for
// a loss the store may not know about yet, it also frees their tokens in
// the store (see cleanupAll).
func (c *Client) loseAll(ls []*Lease, reason LossReason, cause error) {
	var reqs []driver.Request
	for _, l := range ls {
		c.mu.Lock()
		if l.err != nil {
			c.mu.Unlock()
			continue
		}
		c.unlockEmit(c.loseLocked(l, reason, cause))
		reqs = append(reqs, l.req)
	}
	if reason != LossNotHeld {
		c.cleanupAll(reqs)
	}
}

// loseLocked marks l lost; the caller holds c.mu and must deliver the event.
func (c *Client) loseLocked(l *Lease, reason LossReason, cause error) Event {
	err := &LostError{Key: l.req.Key, Reason: reason, Err: cause}
	l.err = err
	c.forgetLocked(l)
	c.unwatchLostLocked(l)
	l.endLocked(err)
	ev := l.event(EventLost, c.clock.Now())
	ev.Reason, ev.Err = reason, cause
	c.log.Warn("lease: lost", "key", l.req.Key, "fence", l.fence, "reason", string(reason), "err", cause)
	return ev
}

func (l *Lease) event(kind EventKind, at time.Time) Event {
	ev := Event{Kind: kind, Key: l.req.Key, Holder: l.p.holder, Fence: l.fence, Time: at, Shared: l.req.Shared, ID: l.id}
	if l.p.tag != "" { // a semaphore's slot
		ev.Semaphore = l.req.Key[:strings.LastIndex(l.req.Key, "#sem")]
	}
	return ev
}
