// The Election type: options, Campaign, Resign, Leader and Run.

package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasekit/lease"
)

// ErrNotLeader is returned by Resign when this candidate does not lead.
var ErrNotLeader = errors.New("election: not the leader")

// Leader describes the current leader of an election, as the store sees it.
type Leader struct {
	// Held is false when nobody leads.
	Held bool
	// Identity is the leader's lease holder.
	Identity string
	// Fence is the leader's fencing token.
	Fence uint64
	// Remaining is the leader's remaining TTL (0: unknown).
	Remaining time.Duration
}

// Option configures an Election.
type Option func(*config)

type config struct {
	identity string
	ttl      time.Duration
}

// WithIdentity sets the candidate's identity, stored as the leadership
// lease's holder and reported by Leader and Observe (default: the Client's
// holder, see lease.WithHolder).
func WithIdentity(id string) Option { return func(c *config) { c.identity = id } }

// WithTTL sets the leadership lease's TTL (default: the Client's): the
// fail-over time after a leader crashes.
func WithTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// Election is one candidate in the election named by a key. It is safe for
// concurrent use; Campaign calls on one Election run one at a time.
type Election struct {
	c        *lease.Client
	key      string
	identity string
	ttl      time.Duration
	acq      []lease.AcquireOption

	campaigning chan struct{} // a token: held while a Campaign runs

	mu  sync.Mutex
	cur *lease.Lease // the leadership lease, nil when not leading
}

// New returns a candidate for the election key over c; invalid options
// return an error matching lease.ErrInvalid.
func New(c *lease.Client, key string, opts ...Option) (*Election, error) {
	if c == nil {
		return nil, lease.Invalid("client", "nil client")
	}
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, lease.Invalid("option", "nil election option")
		}
		o(&cfg)
	}
	e := &Election{c: c, key: key, identity: cfg.identity, ttl: cfg.ttl, campaigning: make(chan struct{}, 1),
		acq: []lease.AcquireOption{lease.WithReentrant(false)}} // two candidates of one Client are two
	if e.identity == "" {
		e.identity = c.Holder()
	} else {
		e.acq = append(e.acq, lease.WithHolder(e.identity))
	}
	if e.ttl == 0 {
		e.ttl = c.TTL()
	} else {
		e.acq = append(e.acq, lease.WithTTL(e.ttl))
	}
	if key == "" {
		return nil, lease.Invalid("key", "empty")
	}
	if e.ttl < lease.MinTTL {
		return nil, lease.Invalid("ttl", "%v is below the minimum %v", e.ttl, lease.MinTTL)
	}
	return e, nil
}

// Key returns the election's key (the leadership lease's key).
func (e *Election) Key() string { return e.key }

// Identity returns this candidate's identity.
func (e *Election) Identity() string { return e.identity }

// Lease returns the leadership lease while this candidate leads (by the
// last Campaign), else nil.
func (e *Election) Lease() *lease.Lease {
	e.mu.Lock()
	l := e.cur
	e.mu.Unlock()
	if l == nil || l.Err() != nil {
		return nil
	}
	return l
}

// Campaign blocks until this candidate leads and returns the leadership
// lease (its Fence is the term's fencing token; its Context ends when
// leadership ends), or the current one if it already leads. Its errors are
// lease.Client.Acquire's: ctx's, lease.ErrClosed, lease.ErrHeld (another
// candidate on the same Client leads), lease.ErrQueueFull.
func (e *Election) Campaign(ctx context.Context) (*lease.Lease, error) {
	select {
	case e.campaigning <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("election %q: campaign: %w", e.key, ctx.Err())
	}
	defer func() { <-e.campaigning }()
	if l := e.Lease(); l != nil {
		return l, nil
	}
	l, err := e.c.Acquire(ctx, e.key, e.acq...)
	if err != nil {
		return nil, fmt.Errorf("election %q: campaign: %w", e.key, err)
	}
	e.mu.Lock()
	e.cur = l
	e.mu.Unlock()
	return l, nil
}

// Resign releases the leadership lease, so that another candidate can lead
// at once. It returns an error matching ErrNotLeader if this candidate does
// not lead (or its leadership was already lost).
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	l := e.cur
	e.cur = nil
	e.mu.Unlock()
	if l == nil {
		return fmt.Errorf("election %q: resign: %w", e.key, ErrNotLeader)
	}
	err := l.Release(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lease.ErrLost), errors.Is(err, lease.ErrReleased), errors.Is(err, lease.ErrNotHeld):
		return fmt.Errorf("election %q: resign: %w (%w)", e.key, ErrNotLeader, err)
	default:
		return fmt.Errorf("election %q: resign: %w", e.key, err)
	}
}

// Leader reports the current leader as the store sees it (one Inspect).
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	info, err := e.c.Inspect(ctx, e.key)
	if err != nil {
		return Leader{}, fmt.Errorf("election %q: leader: %w", e.key, err)
	}
	if !info.Held {
		return Leader{}, nil
	}
	return Leader{Held: true, Identity: info.Holder, Fence: info.Fence, Remaining: info.Remaining}, nil
}

// Run campaigns, calls fn while this candidate leads, and campaigns again
// after fn returns, until ctx ends (it then returns ctx's error) or Campaign
// fails with an error it cannot retry (ErrClosed, ErrInvalid, ErrHeld,
// ErrQueueFull).
//
// fn's leaderCtx is cancelled when leadership is lost (its cause matches
// lease.ErrLost) or ctx ends; fn must then stop acting as the leader. The
// Client reports a loss at its local deadline, before the store can let
// another candidate in, and leadership is released only after fn returned,
// also when fn panics. LeaseFrom(leaderCtx) returns the term's lease: pass
// its Fence to the resources the leader writes.
func (e *Election) Run(ctx context.Context, fn func(leaderCtx context.Context)) error {
	if fn == nil {
		return lease.Invalid("function", "nil")
	}
	for {
		l, err := e.Campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		e.lead(ctx, l, fn)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// lead runs fn under l and releases l after fn returned.
func (e *Election) lead(ctx context.Context, l *lease.Lease, fn func(context.Context)) {
	// Cancelled by the lease's context itself, in the call that declares a
	// loss; Run's ctx cancels it through AfterFunc.
	lc, cancel := context.WithCancelCause(l.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	leaderCtx := leaderContext{Context: lc, parent: ctx, l: l}
	defer func() {
		stop()
		cancel(nil)
		e.mu.Lock()
		if e.cur == l {
			e.cur = nil
		}
		e.mu.Unlock()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), l.TTL())
		defer rcancel()
		// Lost or resigned leases need no release; a failed release frees
		// when the TTL runs out.
		_ = l.Release(rctx)
	}()
	fn(leaderCtx)
}

type leaseKey struct{}

// leaderContext is a term's leaderCtx: cancelled with the lease's context,
// with Run's ctx's values and deadline.
type leaderContext struct {
	context.Context                 // child of l.Context(), cancelled when Run's ctx ends
	parent          context.Context // Run's ctx
	l               *lease.Lease
}

// Deadline is Run's ctx's deadline.
func (c leaderContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Value returns the term's lease for LeaseFrom and Run's ctx's values.
func (c leaderContext) Value(key any) any {
	if _, ok := key.(leaseKey); ok {
		return c.l
	}
	// Cancellation keys come from the child's chain, others from Run's ctx.
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.parent.Value(key)
}

// String names the context, as the context package's types do.
func (c leaderContext) String() string { return "election.leaderCtx" }

// LeaseFrom returns the leadership lease of the term whose leaderCtx (given
// to Run's function) is ctx, or nil for any other context.
func LeaseFrom(ctx context.Context) *lease.Lease {
	l, _ := ctx.Value(leaseKey{}).(*lease.Lease)
	return l
}
