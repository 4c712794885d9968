// Several keys at once: Client.AcquireAll and the Multi it returns.

package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Multi is a set of leases acquired together by [Client.AcquireAll], one
// per key, each with its own fence. Its Context ends when any of them is
// lost or released.
type Multi struct {
	leases []*Lease // in key order
	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool
}

// AcquireAll acquires every key or none, waiting as Acquire does, with the
// Client's lease settings. It takes the keys in sorted order and waits for a
// key while holding others only when they all sort before it, and then for
// at most the renew interval in all: clients asking for overlapping sets in
// any order cannot deadlock (a cycle of waiters would need one waiting for a
// key that sorts before one it holds), and no key is held idle for long.
// When that time is up, or a key sorting before one it holds is refused, it
// releases what it holds, waits for that key (in its FIFO queue) holding
// nothing, and goes on from there. A lease lost meanwhile is taken again:
// the set it returns was held at once. Keys must be distinct; on an error,
// none is held.
func (c *Client) AcquireAll(ctx context.Context, keys ...string) (*Multi, error) {
	return c.acquireAll(ctx, keys, true)
}

// TryAcquireAll acquires every key or none, without waiting: if a key is
// held, it releases the others and returns that key's *HeldError.
func (c *Client) TryAcquireAll(ctx context.Context, keys ...string) (*Multi, error) {
	return c.acquireAll(ctx, keys, false)
}

func (c *Client) acquireAll(ctx context.Context, keys []string, wait bool) (*Multi, error) {
	sorted := slices.Sorted(slices.Values(keys))
	if len(keys) == 0 || len(slices.Compact(slices.Clone(sorted))) != len(keys) {
		return nil, Invalid("keys", "%d keys, want one or more, all distinct", len(keys))
	}
	held := make(map[string]*Lease, len(keys))
	releaseAll := func() {
		for k, l := range held {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.TTL())
			_ = l.Release(rctx)
			cancel()
			delete(held, k)
		}
	}
	var until time.Time // the end of waiting while holding; zero: not begun
	for i := 0; i < len(sorted); i++ {
		k := sorted[i]
		if held[k] != nil {
			continue
		}
		l, err := c.nextOfAll(ctx, k, held, wait, &until)
		var he *HeldError
		if (errors.As(err, &he) && !he.Self || errors.Is(err, errHoldWait)) && wait && ctx.Err() == nil {
			releaseAll() // wait for k holding nothing, then take the others again
			until = time.Time{}
			l, err = c.Acquire(ctx, k)
			i = -1
		}
		if err != nil {
			releaseAll()
			return nil, fmt.Errorf("lease: acquire all of %q: %w", keys, err)
		}
		held[k] = l
		if i == len(sorted)-1 && forgetLost(held) {
			i = -1 // a lease lost while the others were taken: the set was never held at once
		}
	}
	m := &Multi{}
	m.ctx, m.cancel = context.WithCancelCause(context.Background())
	for _, k := range sorted {
		l := held[k]
		m.leases = append(m.leases, l)
		m.stops = append(m.stops, context.AfterFunc(l.Context(), func() { m.cancel(context.Cause(l.Context())) }))
	}
	return m, nil
}

// forgetLost removes the lost leases from held and reports whether there
// were any.
func forgetLost(held map[string]*Lease) bool {
	n := len(held)
	for k, l := range held {
		if l.Err() != nil {
			delete(held, k)
		}
	}
	return len(held) < n
}

// errHoldWait ends a wait of AcquireAll while it holds keys.
var errHoldWait = errors.New("lease: waited long enough while holding other keys")

// nextOfAll takes key k for AcquireAll while it holds held: if wait and
// every held key sorts before k, waiting until until (set to the renew
// interval from now by the first such wait), else with one try.
func (c *Client) nextOfAll(ctx context.Context, k string, held map[string]*Lease, wait bool, until *time.Time) (*Lease, error) {
	for h := range held {
		wait = wait && h < k
	}
	switch {
	case !wait:
		return c.TryAcquire(ctx, k)
	case len(held) == 0:
		return c.Acquire(ctx, k)
	case until.IsZero():
		p, err := c.prepare(k, nil)
		if err != nil {
			return nil, err
		}
		*until = c.clock.Now().Add(p.renew)
	}
	left := until.Sub(c.clock.Now())
	if left <= 0 {
		return c.TryAcquire(ctx, k)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := c.clock.NewTimer(left)
	defer t.Stop()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-t.C():
			cancel(errHoldWait)
		case <-stop:
		}
	}()
	l, err := c.Acquire(wctx, k)
	if err != nil && context.Cause(wctx) == errHoldWait {
		return nil, fmt.Errorf("acquire %q: %w", k, errHoldWait)
	}
	return l, err
}

// Leases returns the leases, in key order.
func (m *Multi) Leases() []*Lease { return slices.Clone(m.leases) }

// Fence returns key's fence, 0 if key is not one of the set.
func (m *Multi) Fence(key string) uint64 {
	for _, l := range m.leases {
		if l.Key() == key {
			return l.Fence()
		}
	}
	return 0
}

// Context returns a context cancelled, with that lease's Err as its cause,
// as soon as one of the leases is lost or released.
func (m *Multi) Context() context.Context { return m.ctx }

// Err returns nil while every lease is held, else the first lease's error.
func (m *Multi) Err() error {
	for _, l := range m.leases {
		if err := l.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Release releases every lease and returns their errors, joined.
func (m *Multi) Release(ctx context.Context) error {
	errs := make([]error, len(m.leases))
	for i, l := range m.leases {
		m.stops[i]()
		errs[i] = l.Release(ctx)
	}
	m.cancel(ErrReleased)
	return errors.Join(errs...)
}
