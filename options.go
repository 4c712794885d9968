package lease

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/leasekit/lease/driver"
)

// Defaults.
const (
	// DefaultTTL is the lease TTL when WithTTL is not given.
	DefaultTTL = 10 * time.Second
	// MinTTL is the shortest TTL the Client accepts; a store may require more.
	MinTTL = 10 * time.Millisecond
	// MaxKeyLen is the longest key, in bytes, the Client accepts; a store may
	// allow less.
	MaxKeyLen = 512
	// MaxHolderLen is the longest holder identity, in bytes, the Client
	// accepts and every store keeps (see [CheckHolder]).
	MaxHolderLen = 512
	// MinRenewInterval is the shortest renew interval the Client accepts.
	MinRenewInterval = time.Millisecond
)

// params are the per-lease settings; both Client and Acquire options set them.
type params struct {
	ttl      time.Duration
	renew    time.Duration // 0: ttl/3
	drift    time.Duration // valid when driftSet
	driftSet bool          // WithDriftMargin was given
	holder   string
	tag      string // appended to holder in the store (a semaphore's " [sem n=N]"); no option sets it
}

type config struct {
	params
	observers []Observer
	logger    *slog.Logger
	clock     Clock
	fifo      bool
	errs      []error
}

// Option configures a Client.
type Option interface{ applyClient(*config) }

// AcquireOption configures one acquisition, overriding the Client's setting.
type AcquireOption interface{ applyAcquire(*params) }

// LeaseOption is an option that applies to a Client (as its default) and to a
// single acquisition.
type LeaseOption func(*params)

func (o LeaseOption) applyClient(c *config)  { o(&c.params) }
func (o LeaseOption) applyAcquire(p *params) { o(p) }

type clientOption func(*config)

func (o clientOption) applyClient(c *config) { o(c) }

// WithTTL sets the lease TTL (default 10s): how long the store keeps a lease
// whose holder stopped renewing. It bounds the fail-over time after a crash.
// On an acquisition, 0 means the Client's TTL.
func WithTTL(d time.Duration) LeaseOption { return func(p *params) { p.ttl = d } }

// WithRenewInterval sets the heartbeat period (default TTL/3). It must be
// shorter than the TTL minus the drift margin.
func WithRenewInterval(d time.Duration) LeaseOption { return func(p *params) { p.renew = d } }

// WithDriftMargin sets how much earlier than the store's expiry the Client
// considers a lease lost, to absorb clock-rate differences and scheduling
// delays of the heartbeat goroutine (default TTL/10 + 1ms). A larger margin
// only makes a stalled holder give up earlier; it never risks safety.
func WithDriftMargin(d time.Duration) LeaseOption {
	return func(p *params) { p.drift, p.driftSet = d, true }
}

// WithHolder sets the human-readable identity stored beside the token (default
// "hostname:pid"). It is shown to other clients in HeldError and Inspect.
func WithHolder(h string) LeaseOption { return func(p *params) { p.holder = h } }

// WithObserver adds an Observer that receives lease events. Observers add
// up: given more than once (a metrics collector and a tracer, say), each
// observer receives every event, in the order the options were given.
func WithObserver(o Observer) Option {
	return clientOption(func(c *config) {
		if o == nil {
			c.errs = append(c.errs, Invalid("observer", "nil observer"))
			return
		}
		c.observers = append(c.observers, o)
	})
}

// WithLogger sets the logger (default: discard). Tokens are never logged in full.
func WithLogger(l *slog.Logger) Option {
	return clientOption(func(c *config) {
		if l == nil {
			c.errs = append(c.errs, Invalid("logger", "nil logger"))
		}
		c.logger = l
	})
}

// WithFIFO sets whether Acquire waits in the store's FIFO queue of waiters
// (default true, with stores that implement Queuer). With false, waiters race
// for a released key and the releaser may take it again at once: more
// acquisitions per second under contention, but no bound on a waiter's wait.
func WithFIFO(enabled bool) Option {
	return clientOption(func(c *config) { c.fifo = enabled })
}

// WithClock sets the Client's clock (default: the system clock).
func WithClock(clk Clock) Option {
	return clientOption(func(c *config) {
		if clk == nil {
			c.errs = append(c.errs, Invalid("clock", "nil clock"))
		}
		c.clock = clk
	})
}

func defaultHolder() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "unknown"
	}
	return fmt.Sprintf("%s:%d", h, os.Getpid())
}

// resolve fills defaults in p and validates it against the store's limits.
func (p params) resolve(lim driver.Caps) (params, error) {
	if p.ttl == 0 {
		p.ttl = DefaultTTL
	}
	minTTL := MinTTL
	if lim.MinTTL > minTTL {
		minTTL = lim.MinTTL
	}
	if p.ttl < minTTL {
		return p, Invalid("ttl", "%v is below the minimum %v", p.ttl, minTTL)
	}
	if lim.MaxTTL > 0 && p.ttl > lim.MaxTTL {
		return p, Invalid("ttl", "%v is above the store's maximum %v", p.ttl, lim.MaxTTL)
	}
	switch {
	case !p.driftSet:
		p.drift = p.ttl/10 + time.Millisecond
	case p.drift < 0:
		return p, Invalid("drift margin", "%v is negative", p.drift)
	}
	if p.drift >= p.ttl/2 {
		return p, Invalid("drift margin", "%v must be below half the TTL %v", p.drift, p.ttl)
	}
	if p.renew == 0 {
		p.renew = p.ttl / 3
	}
	if p.renew < MinRenewInterval {
		return p, Invalid("renew interval", "%v is below the minimum %v (the heartbeat would spin)", p.renew, MinRenewInterval)
	}
	if p.renew >= p.ttl-p.drift {
		return p, Invalid("renew interval", "%v must be shorter than the TTL %v minus the drift margin %v", p.renew, p.ttl, p.drift)
	}
	if len(p.holder)+len(p.tag) > MaxHolderLen {
		return p, Invalid("holder", "%d bytes, longer than %d", len(p.holder)+len(p.tag), MaxHolderLen)
	}
	return p, nil
}
