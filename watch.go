// Watching keys without holding them, for packages built on the Client (the
// election package): WaitRelease waits for a key's release announcement on
// the Client's shared subscription; Holder and TTL expose the Client's
// defaults.

package lease

import (
	"context"
	"fmt"
	"time"
)

// WaitRelease blocks until the store announces that key may have been
// released (true), d passes (false), ctx ends (ctx's error) or the Client is
// closed (ErrClosed). It uses the Client's one release subscription, shared
// with its waiters, so watching costs no round trip of its own; when the
// store is not a Notifier (or the subscription is down) it only sleeps for d.
// A true result is a hint to look again with Inspect, not a promise that the
// key is free: a waiter may have taken it already, and a broken subscription
// wakes every watcher because announcements may have been missed.
// Acquisitions are never announced, and expiries only where the store sees
// them (etcd, ZooKeeper); bound d accordingly.
func (c *Client) WaitRelease(ctx context.Context, key string, d time.Duration) (bool, error) {
	if err := c.validKey(key); err != nil {
		return false, err
	}
	if c.isClosed() {
		return false, ErrClosed
	}
	w := c.hub.register("", key)
	defer c.hub.unregister(w)
	c.hub.ensure(ctx)
	t := c.clock.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-w.ch:
		return true, nil
	case <-t.C():
		return false, nil
	case <-ctx.Done():
		return false, fmt.Errorf("lease: wait for the release of %q: %w", key, ctx.Err())
	case <-c.stop:
		return false, ErrClosed
	}
}

// Holder returns the Client's default holder identity: the one WithHolder
// gave to New, or "hostname:pid".
func (c *Client) Holder() string { return c.def.holder }

// TTL returns the Client's default lease TTL.
func (c *Client) TTL() time.Duration {
	p, err := c.def.resolve(c.caps)
	if err != nil { // cannot happen: New validated the defaults
		return DefaultTTL
	}
	return p.ttl
}
