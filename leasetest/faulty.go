// FaultyStore: a driver.Store wrapper that injects faults, for tests only.

package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/leasekit/lease/driver"
)

// FaultyStore wraps a driver.Store and forwards every call to it, except where
// a fault was switched on: renewals can be blocked (like a stalled process or
// a partitioned network) or failed, and acquisitions failed. It counts the
// calls it sees. It is meant for tests of the Client and of stores; it is safe
// for concurrent use.
//
// FaultyStore always implements [driver.BatchRenewer] (delegating to the
// inner store's RenewMany if it has one, else renewing one by one) and
// [driver.Notifier] (delegating; Subscribe returns an error wrapping
// errors.ErrUnsupported when the inner store is not a Notifier); Caps is the
// inner store's.
type FaultyStore struct {
	inner driver.Store

	acquires   atomic.Int64
	releases   atomic.Int64
	renewals   atomic.Int64
	renewCalls atomic.Int64
	closeOnce  sync.Once
	closed     chan struct{} // closed by Close: unblocks blocked renewals

	mu         sync.Mutex
	unblock    chan struct{} // non-nil while renewals are blocked; closed to unblock
	renewErr   error
	acquireErr error
}

// Compile-time checks of the interfaces a FaultyStore implements.
var (
	_ driver.Store        = (*FaultyStore)(nil)
	_ driver.BatchRenewer = (*FaultyStore)(nil)
	_ driver.Notifier     = (*FaultyStore)(nil)
)

// Faulty returns a FaultyStore over s with no fault switched on.
func Faulty(s driver.Store) *FaultyStore {
	return &FaultyStore{inner: s, closed: make(chan struct{})}
}

// Inner returns the wrapped store.
func (f *FaultyStore) Inner() driver.Store { return f.inner }

// BlockRenewals(true) makes every Renew and RenewMany call, including those
// already waiting, block without reaching the inner store until
// BlockRenewals(false), the call's ctx ends (the call then returns ctx.Err())
// or the FaultyStore is closed. Calls unblocked by BlockRenewals(false)
// proceed normally.
func (f *FaultyStore) BlockRenewals(block bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case block && f.unblock == nil:
		f.unblock = make(chan struct{})
	case !block && f.unblock != nil:
		close(f.unblock)
		f.unblock = nil
	}
}

// FailRenewals makes every Renew and RenewMany request fail with err without
// reaching the inner store; nil switches the fault off. A blocked renewal
// fails once it is unblocked.
func (f *FaultyStore) FailRenewals(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewErr = err
}

// FailAcquire makes every Acquire fail with err without reaching the inner
// store; nil switches the fault off.
func (f *FaultyStore) FailAcquire(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acquireErr = err
}

// Acquires returns how many Acquire calls the FaultyStore has seen, failed
// ones included.
func (f *FaultyStore) Acquires() int64 { return f.acquires.Load() }

// Releases returns how many Release calls the FaultyStore has seen.
func (f *FaultyStore) Releases() int64 { return f.releases.Load() }

// Renewals returns how many renewal requests the FaultyStore has seen: one
// per Renew call and one per request of each RenewMany call, blocked and
// failed ones included.
func (f *FaultyStore) Renewals() int64 { return f.renewals.Load() }

// RenewCalls returns how many Renew and RenewMany calls the FaultyStore has
// seen: with a batching store, fewer than [FaultyStore.Renewals].
func (f *FaultyStore) RenewCalls() int64 { return f.renewCalls.Load() }

// Acquire forwards to the inner store unless FailAcquire set an error.
func (f *FaultyStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	f.acquires.Add(1)
	f.mu.Lock()
	err := f.acquireErr
	f.mu.Unlock()
	if err != nil {
		return driver.Grant{}, err
	}
	return f.inner.Acquire(ctx, r)
}

// Renew forwards to the inner store unless renewals are blocked or failed.
func (f *FaultyStore) Renew(ctx context.Context, r driver.Request) error {
	f.renewals.Add(1)
	f.renewCalls.Add(1)
	if err := f.renewFault(ctx); err != nil {
		return err
	}
	return f.inner.Renew(ctx, r)
}

// RenewMany forwards to the inner store's RenewMany, or renews one by one,
// unless renewals are blocked or failed.
func (f *FaultyStore) RenewMany(ctx context.Context, rs []driver.Request) []error {
	f.renewals.Add(int64(len(rs)))
	f.renewCalls.Add(1)
	errs := make([]error, len(rs))
	if err := f.renewFault(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if b, ok := f.inner.(driver.BatchRenewer); ok {
		return b.RenewMany(ctx, rs)
	}
	for i, r := range rs {
		errs[i] = f.inner.Renew(ctx, r)
	}
	return errs
}

// renewFault waits while renewals are blocked and returns the injected error.
func (f *FaultyStore) renewFault(ctx context.Context) error {
	for {
		f.mu.Lock()
		unblock, err := f.unblock, f.renewErr
		f.mu.Unlock()
		if unblock == nil {
			return err
		}
		select {
		case <-unblock:
		case <-ctx.Done():
			return ctx.Err()
		case <-f.closed:
			return errors.New("leasetest: faulty store closed while a renewal was blocked")
		}
	}
}

// Release forwards to the inner store.
func (f *FaultyStore) Release(ctx context.Context, r driver.Request) error {
	f.releases.Add(1)
	return f.inner.Release(ctx, r)
}

// Inspect forwards to the inner store.
func (f *FaultyStore) Inspect(ctx context.Context, key string) (driver.Info, error) {
	return f.inner.Inspect(ctx, key)
}

// Subscribe forwards to the inner store if it is a [driver.Notifier]; otherwise
// it returns an error wrapping errors.ErrUnsupported.
func (f *FaultyStore) Subscribe(ctx context.Context) (driver.Subscription, error) {
	n, ok := f.inner.(driver.Notifier)
	if !ok {
		return nil, fmt.Errorf("leasetest: %T does not announce releases: %w", f.inner, errors.ErrUnsupported)
	}
	return n.Subscribe(ctx)
}

// Caps returns the inner store's Caps.
func (f *FaultyStore) Caps() driver.Caps { return f.inner.Caps() }

// Close unblocks blocked renewals and closes the inner store.
func (f *FaultyStore) Close() error {
	f.closeOnce.Do(func() { close(f.closed) })
	return f.inner.Close()
}
