// Options for New.

package memlease

import "github.com/leasekit/lease"

// Option configures a Store made by [New].
type Option func(*config)

type config struct {
	clock  lease.Clock
	limits lease.Limits
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
func WithLimits(l lease.Limits) Option {
	return func(cfg *config) { cfg.limits = l }
}
