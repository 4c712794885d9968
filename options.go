package lease

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/leasekit/lease/driver"
)

// Limits and defaults; a store may narrow the limits (driver.Caps).
const (
	DefaultTTL       = 10 * time.Second
	MinTTL           = 10 * time.Millisecond
	MaxKeyLen        = 512 // bytes
	MaxHolderLen     = 512 // bytes
	MinRenewInterval = time.Millisecond
)

// params are the per-lease settings; both Client and Acquire options set them.
type params struct {
	ttl      time.Duration
	renew    time.Duration // 0: ttl/3
	drift    time.Duration // valid when driftSet
	driftSet bool          // WithDriftMargin was given
	holder   string
	tag      string        // follows holder in the store (a semaphore's n)
	maxHold  time.Duration // 0: no limit
	manual   bool          // the caller renews (WithManualRenew)
	reentry  bool          // WithReentrant
	shared   bool          // AcquireShared: a reader's hold
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

// LeaseOption is an option for a Client (its default) or one acquisition.
type LeaseOption func(*params)

func (o LeaseOption) applyClient(c *config)  { o(&c.params) }
func (o LeaseOption) applyAcquire(p *params) { o(p) }

type clientOption func(*config)

func (o clientOption) applyClient(c *config) { o(c) }

// WithTTL sets the lease TTL: how long the store keeps a lease whose holder
// stopped renewing. On an acquisition, 0 means the Client's TTL. A Client
// given none uses DefaultTTL, or the store's maximum (driver.Caps.MaxTTL,
// e.g. a ZooKeeper session timeout) where that is shorter.
func WithTTL(d time.Duration) LeaseOption { return func(p *params) { p.ttl = d } }

// WithRenewInterval sets the heartbeat period (default TTL/3). It must be
// shorter than the TTL minus the drift margin.
func WithRenewInterval(d time.Duration) LeaseOption { return func(p *params) { p.renew = d } }

// WithDriftMargin sets how much earlier than the store's expiry the Client
// considers a lease lost (default TTL/10 + 1ms), to absorb clock-rate
// differences and scheduling delays.
func WithDriftMargin(d time.Duration) LeaseOption {
	return func(p *params) { p.drift, p.driftSet = d, true }
}

// WithHolder sets the identity stored beside the token (default
// "hostname:pid"), shown to others in HeldError and Inspect.
func WithHolder(h string) LeaseOption { return func(p *params) { p.holder = h } }

// WithMaxHold gives a lease up d after its acquisition, even while healthy:
// the Client releases it and its Context ends with a *LostError whose
// Reason is LossMaxHold (0: no limit).
func WithMaxHold(d time.Duration) LeaseOption { return func(p *params) { p.maxHold = d } }

// WithManualRenew leaves the renewals to the caller ([Lease.Renew]), for a
// process that may not run between calls (a serverless handler). The local
// deadline still applies: a lease not renewed within TTL minus the drift
// margin is lost.
func WithManualRenew() LeaseOption { return func(p *params) { p.manual = true } }

// WithReentrant(true) lets an acquisition of a key this Client holds
// succeed at once with the same *Lease, when both acquisitions ask for it:
// each one counts a hold, each Release drops one, and the last frees the
// key. The second acquisition's other options are ignored. Semaphores and
// elections never re-enter.
func WithReentrant(enabled bool) LeaseOption { return func(p *params) { p.reentry = enabled } }

// WithObserver adds an Observer of lease events; each observer given
// receives every event, in the order given.
func WithObserver(o Observer) Option {
	return clientOption(func(c *config) {
		c.observers = append(c.observers, o)
		c.nonNil(o != nil, "observer")
	})
}

// WithLogger sets the logger (default: discard). Tokens are never logged in full.
func WithLogger(l *slog.Logger) Option {
	return clientOption(func(c *config) { c.logger = l; c.nonNil(l != nil, "logger") })
}

// WithFIFO(false) makes waiters race for a released key instead of queueing
// in a FIFO store: more throughput under contention, no bound on a wait.
func WithFIFO(enabled bool) Option {
	return clientOption(func(c *config) { c.fifo = enabled })
}

// WithClock sets the Client's clock (default: the system clock).
func WithClock(clk Clock) Option {
	return clientOption(func(c *config) { c.clock = clk; c.nonNil(clk != nil, "clock") })
}

func (c *config) nonNil(ok bool, what string) {
	if !ok {
		c.errs = append(c.errs, Invalid(what, "nil %s", what))
	}
}

func defaultHolder() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", cmp.Or(h, "unknown"), os.Getpid())
}

// resolve fills defaults in p and validates it against the store's limits.
func (p params) resolve(lim driver.Caps) (params, error) {
	p.ttl = cmp.Or(p.ttl, DefaultTTL)
	if p.maxHold < 0 {
		return p, Invalid("max hold", "%v is negative", p.maxHold)
	}
	minTTL := max(MinTTL, lim.MinTTL)
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
	p.renew = cmp.Or(p.renew, p.ttl/3)
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
