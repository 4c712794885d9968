// The store wrapper whose Close also closes the backend client, keeping the
// optional interfaces (BatchRenewer, Notifier, Limiter) of the store it wraps.

package leaseurl

import (
	"errors"
	"sync"

	"github.com/leasekit/lease"
)

// owned is a store plus the backend client Open created for it.
type owned struct {
	lease.Store
	closer func() error
	once   sync.Once
	err    error
}

// Close closes the store, then the backend client. It is idempotent.
func (o *owned) Close() error {
	o.once.Do(func() { o.err = closeBoth(o.Store, o.closer) })
	return o.err
}

// Unwrap returns the store Open made (a *redislease.Store, *pglease.Store,
// ...), for its store-specific methods.
func (o *owned) Unwrap() lease.Store { return o.Store }

func closeBoth(s lease.Store, closer func() error) error {
	err := s.Close()
	if closer != nil {
		err = errors.Join(err, closer())
	}
	return err
}

// Unwrap returns the backend store inside a store returned by Open (for
// example a *redislease.Store), or s itself.
func Unwrap(s lease.Store) lease.Store {
	if u, ok := s.(interface{ Unwrap() lease.Store }); ok {
		return u.Unwrap()
	}
	return s
}

// wrap returns a store that behaves as s, implements exactly the optional
// interfaces s implements, and whose Close also calls closer.
func wrap(s lease.Store, closer func() error) lease.Store {
	o := &owned{Store: s, closer: closer}
	b, isB := s.(lease.BatchRenewer)
	n, isN := s.(lease.Notifier)
	l, isL := s.(lease.Limiter)
	switch {
	case isB && isN && isL:
		return &struct {
			*owned
			lease.BatchRenewer
			lease.Notifier
			lease.Limiter
		}{o, b, n, l}
	case isB && isN:
		return &struct {
			*owned
			lease.BatchRenewer
			lease.Notifier
		}{o, b, n}
	case isB && isL:
		return &struct {
			*owned
			lease.BatchRenewer
			lease.Limiter
		}{o, b, l}
	case isN && isL:
		return &struct {
			*owned
			lease.Notifier
			lease.Limiter
		}{o, n, l}
	case isB:
		return &struct {
			*owned
			lease.BatchRenewer
		}{o, b}
	case isN:
		return &struct {
			*owned
			lease.Notifier
		}{o, n}
	case isL:
		return &struct {
			*owned
			lease.Limiter
		}{o, l}
	}
	return o
}
