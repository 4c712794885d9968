// Renewals the caller asks for: Lease.Renew (WithManualRenew) and Lease.Extend.

package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease/driver"
)

// Renew renews the lease now and returns once the store has answered: how
// a WithManualRenew lease is kept, and an early renewal of any other. A
// lease whose local deadline has passed is lost, whether or not the
// heartbeat ran meanwhile (a frozen process): Renew then returns its
// *LostError, as it does when the store no longer holds the token. Another
// store error is returned as is; the lease stays held until its deadline.
func (l *Lease) Renew(ctx context.Context) error { return l.renewNow(ctx, "renew", nil) }

// Extend sets the lease's TTL to ttl, checked against the store's limits as
// an acquisition's, and renews it now as Renew does. A renew interval or
// drift margin that was the default (TTL/3, TTL/10+1ms) follows the new TTL;
// an explicit one stays and must suit it. WithMaxHold's limit does not move.
// A store whose leases keep their first TTL (driver.Caps.FixedTTL: etcd,
// PostgreSQL advisory locks) refuses another with errors.ErrUnsupported.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	c := l.c
	c.mu.Lock()
	p := l.p
	c.mu.Unlock()
	if c.caps.FixedTTL && ttl != p.ttl {
		return fmt.Errorf("lease: extend %q: the store keeps a lease's first TTL (%v): %w", l.req.Key, p.ttl, errors.ErrUnsupported)
	}
	if p.renew == p.ttl/3 {
		p.renew = 0
	}
	p.ttl = ttl
	p, err := p.resolve(c.caps)
	if err != nil {
		return fmt.Errorf("lease: extend %q: %w", l.req.Key, err)
	}
	return l.renewNow(ctx, "extend", &p)
}

// renewNow renews l once, with p's TTL if p is set (then l takes p's
// settings if the store accepted it).
func (l *Lease) renewNow(ctx context.Context, op string, p *params) error {
	c := l.c
	req, err := l.claim(ctx)
	if err != nil {
		return fmt.Errorf("lease: %s %q: %w", op, l.req.Key, err)
	}
	if p != nil {
		req.TTL = p.ttl
	}
	sent := c.clock.Now()
	err = c.store.Renew(ctx, req)
	if err == nil && p != nil {
		c.mu.Lock()
		if l.err == nil { // field by field: Holder reads l.p.holder unlocked
			l.p.ttl, l.p.renew, l.p.drift, l.req.TTL = p.ttl, p.renew, p.drift, p.ttl
		}
		c.mu.Unlock()
	}
	c.renewed(sent, []*Lease{l}, []error{err})
	if errors.Is(err, ErrNotHeld) {
		err = l.Err() // renewed made it a *LostError
	}
	if err != nil {
		return fmt.Errorf("lease: %s %q: %w", op, l.req.Key, err)
	}
	return nil
}

// claim waits until no renewal of l is in flight and marks one in flight
// (renewed ends it), returning the request to send. It fails once l is
// lost or released, and loses l if its local deadline has passed.
func (l *Lease) claim(ctx context.Context) (req driver.Request, err error) {
	c := l.c
	for {
		now := c.clock.Now()
		c.mu.Lock()
		in := l.inflight
		switch {
		case l.err != nil:
			err = l.err
		case !now.Before(l.deadline):
			ev := c.loseLocked(l, LossDeadline, l.deadlineCause())
			err = l.err
			c.unlockEmit(ev)
			c.cleanup(l.req)
			return req, err
		case in == nil:
			l.inflight = make(chan struct{})
			req = l.req
		}
		c.mu.Unlock()
		if err != nil || in == nil {
			return req, err
		}
		select {
		case <-in:
		case <-ctx.Done():
			return req, ctx.Err()
		}
	}
}
