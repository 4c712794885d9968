// The Store type, its shared state and the driver.Store operations.

package memlease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/fifo"
)

// ErrClosed is returned (wrapped) by operations on a closed Store handle and
// by Next on a closed Subscription.
var ErrClosed = errors.New("memlease: closed")

// entry is the current (possibly expired) holder of a key.
type entry struct {
	token   string
	holder  string
	fence   uint64
	expires time.Time
}

// state is what the handles of one Store share.
type state struct {
	clock      lease.Clock
	epoch      time.Time // the clock's time at New: queue expiries count from it
	limits     driver.Caps
	maxWaiters int // WithMaxWaiters

	mu     sync.Mutex
	held   map[string]entry           // key -> holder; expired entries count as free
	fences map[string]uint64          // key -> last fence granted, kept forever
	queues map[string][]fifo.Waiter   // key -> waiters in arrival order (see queue.go)
	subs   map[*subscription]struct{} // open subscriptions of every handle
}

// Store is an in-memory lease store. It implements [driver.Store],
// [driver.BatchRenewer], [driver.Notifier], [lease.Limiter] and [lease.Queuer].
// All methods are safe for concurrent use. It runs no goroutines.
//
// A Store is one handle over a set of keys; [Store.Handle] makes more handles
// over the same keys. Closing a handle ends its subscriptions and makes its
// own operations fail with [ErrClosed]; other handles keep working.
type Store struct {
	st     *state
	closed atomic.Bool

	mu   sync.Mutex
	subs map[*subscription]struct{} // subscriptions opened through this handle
}

// Compile-time checks of the interfaces a Store implements.
var (
	_ driver.Store        = (*Store)(nil)
	_ driver.BatchRenewer = (*Store)(nil)
	_ driver.Notifier     = (*Store)(nil)
)

// New returns an empty Store: a first handle over a new set of keys.
func New(opts ...Option) *Store {
	cfg := config{clock: lease.SystemClock(), maxWaiters: driver.DefaultMaxWaiters}
	for _, o := range opts {
		o(&cfg)
	}
	st := &state{
		clock:      cfg.clock,
		epoch:      cfg.clock.Now(),
		limits:     cfg.limits,
		maxWaiters: cfg.maxWaiters,
		held:       make(map[string]entry),
		fences:     make(map[string]uint64),
		queues:     make(map[string][]fifo.Waiter),
		subs:       make(map[*subscription]struct{}),
	}
	return &Store{st: st}
}

// Handle returns a new, open handle over the same keys as s, as another
// process would see them: leases, fences and release announcements are shared,
// but closing one handle does not close the others. Handle works on a closed
// handle too.
func (s *Store) Handle() *Store { return &Store{st: s.st} }

// Caps reports the limits set with [WithLimits], FIFO and the cap of
// waiters.
func (s *Store) Caps() driver.Caps {
	c := s.st.limits
	c.FIFO, c.MaxWaiters = true, s.st.maxWaiters
	return c
}

// Acquire takes r.Key for r.Token for r.TTL if the key is free or its holder
// expired and no live waiter is queued ahead of r.Token, with a fence one above
// the last fence granted for the key. If r.Token already holds the key it
// refreshes the TTL and returns the same fence. Otherwise the error is a
// *[lease.HeldError], and with r.Queue the token is queued (see
// [lease.Queuer]).
func (s *Store) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if err := s.check(ctx, "acquire"); err != nil {
		return driver.Grant{}, err
	}
	if err := s.st.validate(r, true); err != nil {
		return driver.Grant{}, err
	}
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.clock.Now()
	q := st.liveQueueLocked(r.Key, now)
	if e, ok := st.held[r.Key]; ok && now.Before(e.expires) {
		if e.token != r.Token {
			held := &lease.HeldError{Key: r.Key, Holder: e.holder, Fence: e.fence, Remaining: e.expires.Sub(now), Queued: fifo.Ahead(q, r.Token)}
			if r.Queue {
				if err := st.enqueueLocked(r.Key, r.Token, now.Add(r.TTL)); err != nil {
					return driver.Grant{}, err
				}
			}
			return driver.Grant{}, held
		}
		e.holder = r.Holder
		e.expires = now.Add(r.TTL)
		st.held[r.Key] = e
		return driver.Grant{Fence: e.fence}, nil
	}
	if ahead := fifo.Ahead(q, r.Token); ahead > 0 {
		if r.Queue {
			if err := st.enqueueLocked(r.Key, r.Token, now.Add(r.TTL)); err != nil {
				return driver.Grant{}, err
			}
		}
		return driver.Grant{}, &lease.HeldError{Key: r.Key, Queued: ahead}
	}
	st.dequeueLocked(r.Key, r.Token)
	fence := st.fences[r.Key] + 1
	st.fences[r.Key] = fence
	st.held[r.Key] = entry{token: r.Token, holder: r.Holder, fence: fence, expires: now.Add(r.TTL)}
	return driver.Grant{Fence: fence}, nil
}

// Renew extends the lease to r.TTL from now if r.Token still holds r.Key;
// otherwise the error matches [lease.ErrNotHeld].
func (s *Store) Renew(ctx context.Context, r driver.Request) error {
	if err := s.check(ctx, "renew"); err != nil {
		return err
	}
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.renewLocked(r, st.clock.Now())
}

// RenewMany renews every request as Renew would, atomically, and returns one
// error per request.
func (s *Store) RenewMany(ctx context.Context, rs []driver.Request) []error {
	errs := make([]error, len(rs))
	if err := s.check(ctx, "renew"); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.clock.Now()
	for i, r := range rs {
		errs[i] = st.renewLocked(r, now)
	}
	return errs
}

// Release frees r.Key if r.Token still holds it and announces the release to
// every open subscription; otherwise the error matches [lease.ErrNotHeld]. It
// also takes r.Token out of the key's queue of waiters, announcing the key if
// it is free so that the next waiter looks again.
func (s *Store) Release(ctx context.Context, r driver.Request) error {
	if err := s.check(ctx, "release"); err != nil {
		return err
	}
	if err := s.st.validate(r, false); err != nil {
		return err
	}
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.clock.Now()
	if _, err := st.holdingLocked(r, now); err != nil {
		if st.dequeueLocked(r.Key, r.Token) {
			if e, ok := st.held[r.Key]; !ok || !now.Before(e.expires) {
				st.announceLocked(r.Key, now)
			}
		}
		return err
	}
	delete(st.held, r.Key)
	st.announceLocked(r.Key, now)
	return nil
}

// announceLocked tells every open subscription that key may be free, naming
// the live waiter at the head of its queue, if any; st.mu is held.
func (st *state) announceLocked(key string, now time.Time) {
	a := driver.Announcement{Key: key}
	if q := st.liveQueueLocked(key, now); len(q) > 0 {
		a.Next = q[0].Token
	}
	for sub := range st.subs {
		sub.announceLocked(a)
	}
}

// Inspect reports who holds key. For a free key Info.Held is false and
// Info.Fence is the last fence granted for the key (0 if none).
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := s.check(ctx, "inspect"); err != nil {
		return driver.Info{}, err
	}
	if err := s.st.validateKey(key); err != nil {
		return driver.Info{}, err
	}
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.clock.Now()
	if e, ok := st.held[key]; ok && now.Before(e.expires) {
		return driver.Info{Key: key, Held: true, Holder: e.holder, Fence: e.fence, Remaining: e.expires.Sub(now)}, nil
	}
	return driver.Info{Key: key, Fence: st.fences[key]}, nil
}

// Close closes this handle and the subscriptions opened through it. Other
// handles and their leases are not affected. Closing twice is harmless.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	for sub := range subs {
		sub.close()
	}
	return nil
}

// check fails when ctx is done or the handle is closed.
func (s *Store) check(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memlease: %s: %w", op, err)
	}
	if s.closed.Load() {
		return fmt.Errorf("memlease: %s: %w", op, ErrClosed)
	}
	return nil
}

// renewLocked renews r at now; st.mu is held.
func (st *state) renewLocked(r driver.Request, now time.Time) error {
	if err := st.validate(r, true); err != nil {
		return err
	}
	e, err := st.holdingLocked(r, now)
	if err != nil {
		return err
	}
	e.expires = now.Add(r.TTL)
	st.held[r.Key] = e
	return nil
}

// holdingLocked returns r.Key's entry if r.Token holds it at now; st.mu is held.
func (st *state) holdingLocked(r driver.Request, now time.Time) (entry, error) {
	e, ok := st.held[r.Key]
	switch {
	case !ok:
		return entry{}, fmt.Errorf("memlease: key %q is not held: %w", r.Key, lease.ErrNotHeld)
	case e.token != r.Token:
		return entry{}, fmt.Errorf("memlease: key %q is held by another token: %w", r.Key, lease.ErrNotHeld)
	case !now.Before(e.expires):
		return entry{}, fmt.Errorf("memlease: lease on key %q expired: %w", r.Key, lease.ErrNotHeld)
	}
	return e, nil
}

// validate checks r against the store's limits; withTTL also checks r.TTL.
func (st *state) validate(r driver.Request, withTTL bool) error {
	if err := st.validateKey(r.Key); err != nil {
		return err
	}
	if r.Token == "" {
		return lease.Invalid("token", "empty")
	}
	if !withTTL {
		return nil
	}
	if r.TTL <= 0 {
		return lease.Invalid("ttl", "%v is not positive", r.TTL)
	}
	if st.limits.MinTTL > 0 && r.TTL < st.limits.MinTTL {
		return lease.Invalid("ttl", "%v is below the store's minimum %v", r.TTL, st.limits.MinTTL)
	}
	if st.limits.MaxTTL > 0 && r.TTL > st.limits.MaxTTL {
		return lease.Invalid("ttl", "%v is above the store's maximum %v", r.TTL, st.limits.MaxTTL)
	}
	return nil
}

func (st *state) validateKey(key string) error {
	if key == "" {
		return lease.Invalid("key", "empty")
	}
	if st.limits.MaxKeyLen > 0 && len(key) > st.limits.MaxKeyLen {
		return lease.Invalid("key", "longer than the store's maximum of %d bytes", st.limits.MaxKeyLen)
	}
	return nil
}
