// The store wrapper whose Close also closes the backend client, answering the
// optional interfaces (BatchRenewer, Notifier, Lister, Breaker) from the store
// it wraps.

package leaseurl

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/leasekit/lease/driver"
)

// owned is a store plus the backend client Open created for it.
type owned struct {
	driver.Store
	closer func() error
	once   sync.Once
	err    error
}

// Close closes the store, then the backend client. It is idempotent.
func (o *owned) Close() error {
	o.once.Do(func() { o.err = closeBoth(o.Store, o.closer) })
	return o.err
}

// Unwrap returns the store Open made (a *redislease.Store, a pglease.Store,
// ...), for its store-specific methods.
func (o *owned) Unwrap() driver.Store { return o.Store }

func closeBoth(s driver.Store, closer func() error) error {
	err := s.Close()
	if closer != nil {
		err = errors.Join(err, closer())
	}
	return err
}

// Unwrap returns the backend store inside a store returned by Open (for
// example a *redislease.Store), or s itself.
func Unwrap(s driver.Store) driver.Store {
	if u, ok := s.(interface{ Unwrap() driver.Store }); ok {
		return u.Unwrap()
	}
	return s
}

// wrap returns a store that behaves as s and whose Close also calls closer.
func wrap(s driver.Store, closer func() error) driver.Store {
	return &owned{Store: s, closer: closer}
}

// The optional interfaces: an owned store offers each of them and answers
// from the store it wraps, so the Client sees the same capabilities.
var (
	_ driver.BatchRenewer = (*owned)(nil)
	_ driver.Notifier     = (*owned)(nil)
	_ driver.Lister       = (*owned)(nil)
	_ driver.Breaker      = (*owned)(nil)
)

// RenewMany uses the wrapped store's RenewMany, or renews one by one for a
// store without it (every store Open makes has one).
func (o *owned) RenewMany(ctx context.Context, rs []driver.Request) []error {
	if b, ok := o.Store.(driver.BatchRenewer); ok {
		return b.RenewMany(ctx, rs)
	}
	errs := make([]error, len(rs))
	for i, r := range rs {
		errs[i] = o.Store.Renew(ctx, r)
	}
	return errs
}

// Subscribe uses the wrapped store's Subscribe; without one the Client's
// waiters sleep until the holder's TTL runs out.
func (o *owned) Subscribe(ctx context.Context) (driver.Subscription, error) {
	if n, ok := o.Store.(driver.Notifier); ok {
		return n.Subscribe(ctx)
	}
	return nil, fmt.Errorf("leaseurl: the store announces no releases: %w", errors.ErrUnsupported)
}

// List uses the wrapped store's List, if it has one.
func (o *owned) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	if l, ok := o.Store.(driver.Lister); ok {
		return l.List(ctx, prefix, cursor, limit)
	}
	return nil, "", fmt.Errorf("leaseurl: the store cannot list its keys: %w", errors.ErrUnsupported)
}

// Break uses the wrapped store's Break, if it has one.
func (o *owned) Break(ctx context.Context, key string) (driver.Entry, error) {
	if b, ok := o.Store.(driver.Breaker); ok {
		return b.Break(ctx, key)
	}
	return driver.Entry{}, fmt.Errorf("leaseurl: the store cannot break leases: %w", errors.ErrUnsupported)
}
