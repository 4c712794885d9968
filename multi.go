// Several keys at once: Client.AcquireAll and the Multi it returns.

package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
// Client's lease settings. It never waits while it holds a key: it tries
// the keys in order, and when one is held by another, it releases those it
// holds, waits for that one (in its FIFO queue) and tries the others again,
// so clients asking for overlapping sets in any order cannot deadlock.
// Keys must be distinct; on an error, none is held.
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
	for i := 0; i < len(sorted); i++ {
		k := sorted[i]
		if held[k] != nil {
			continue
		}
		l, err := c.TryAcquire(ctx, k)
		var he *HeldError
		if errors.As(err, &he) && !he.Self && wait {
			releaseAll() // wait for k holding nothing, then try every key again
			l, err = c.Acquire(ctx, k)
			i = -1
		}
		if err != nil {
			releaseAll()
			return nil, fmt.Errorf("lease: acquire all of %q: %w", keys, err)
		}
		held[k] = l
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
