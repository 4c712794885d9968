// Options for New.

package memlease

import (
	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Option configures a Store made by [New].
type Option func(*config)

type config struct {
	clock      lease.Clock
	limits     driver.Caps
	maxWaiters int
}

// WithClock sets the clock by which the Store judges expiry (default
// [lease.SystemClock]). Pass the same fake clock to lease.WithClock to test
// timing without sleeping. A nil clock keeps the default.
func WithClock(c lease.Clock) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.clock = c
		}
	}
}

// WithLimits makes the Store report l from Limits and reject requests outside
// it with an error matching [lease.ErrInvalid] (default: no limits). It lets
// tests exercise how the Client honours a [lease.Limiter].
func WithLimits(l driver.Caps) Option {
	return func(cfg *config) { cfg.limits = l }
}

// WithMaxWaiters caps each key's queue of live waiters at n (default
// [driver.DefaultMaxWaiters]): a queued Acquire of a new token beyond it fails
// with a *[lease.QueueFullError]. The cap is exact. An n outside
// [lease.CheckMaxWaiters]'s range makes every queued Acquire fail with an
// error matching [lease.ErrInvalid] (New cannot return an error); check n
// first with lease.CheckMaxWaiters to fail early.
func WithMaxWaiters(n int) Option {
	return func(cfg *config) { cfg.maxWaiters = n }
}

// MaxWaiters returns the cap of each key's queue of waiters (WithMaxWaiters),
// shared by every handle of the Store.
func (s *Store) MaxWaiters() int { return s.st.maxWaiters }
