package memlease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/fifo"
)

// ErrClosed is returned (wrapped) by the operations of a closed Store handle
// and by Next on a closed subscription.
var ErrClosed = errors.New("memlease: closed")

// Store is one handle over an in-memory set of keys. It implements
// [driver.Store], [driver.BatchRenewer], [driver.BatchAcquirer],
// [driver.BatchReleaser] and [driver.Notifier], is safe for concurrent use
// and runs no goroutines.
type Store struct {
	st     *state
	closed bool // guarded by st.mu
}

var _ driver.BatchRenewer = (*Store)(nil) // and a driver.Store: see Plain
var _ driver.Notifier = (*Store)(nil)
var _ driver.BatchAcquirer = (*Store)(nil)
var _ driver.BatchReleaser = (*Store)(nil)

// state is what the handles of one Store share.
type state struct {
	clock lease.Clock
	epoch time.Time // queue entries expire in nanoseconds since epoch
	caps  driver.Caps

	mu   sync.Mutex
	keys map[string]*record // kept forever, so fences are never reused
	subs map[*subscription]struct{}
}

// record is a key: its writer or readers, the last fence granted and its
// waiters.
type record struct {
	token, holder string
	fence         uint64
	expires       time.Time
	readers       map[string]reader // by token; expired ones until pruned
	queue         []fifo.Waiter
	broken        map[string]time.Time // evicted tokens' tombstones, until when
}

// reader is one shared hold of a key.
type reader struct {
	holder  string
	expires time.Time
}

// Option configures a Store made by [New].
type Option func(*state)

// WithClock sets the clock by which the Store judges expiry (default, or if
// c is nil: [lease.SystemClock]). Pass the same fake clock to lease.WithClock
// to test timing without sleeping.
func WithClock(c lease.Clock) Option {
	return func(st *state) { st.clock = c }
}

// WithLimits makes the Store declare c's MinTTL, MaxTTL and MaxKeyLen in its
// Caps (default: none), so tests can check how the Client honours them.
func WithLimits(c driver.Caps) Option {
	return func(st *state) { st.caps.MinTTL, st.caps.MaxTTL, st.caps.MaxKeyLen = c.MinTTL, c.MaxTTL, c.MaxKeyLen }
}

// WithMaxWaiters caps each key's queue at n live waiters (default
// [driver.DefaultMaxWaiters]). The Client rejects an n out of range.
func WithMaxWaiters(n int) Option {
	return func(st *state) { st.caps.MaxWaiters = n }
}

// New returns an empty Store: a first handle over a new set of keys.
func New(opts ...Option) *Store {
	st := &state{
		caps: driver.Caps{FIFO: true, MaxWaiters: driver.DefaultMaxWaiters, Shared: true},
		keys: make(map[string]*record),
		subs: make(map[*subscription]struct{}),
	}
	for _, o := range opts {
		o(st)
	}
	if st.clock == nil {
		st.clock = lease.SystemClock()
	}
	st.epoch = st.clock.Now()
	return &Store{st: st}
}

// Handle returns a new, open handle over the same keys as s, as another
// process sees them. It works on a closed handle too.
func (s *Store) Handle() *Store { return &Store{st: s.st} }

// Caps declares FIFO, shared holds, the cap of waiters and the limits set
// by WithLimits.
func (s *Store) Caps() driver.Caps { return s.st.caps }

// Acquire grants r.Key to r.Token if the key is free (or, for a shared
// request, not held by a writer) and no live waiter it must respect is
// queued ahead of r.Token, or refreshes the lease if r.Token holds it
// already. Otherwise it queues r.Token if r.Queue and returns a
// *lease.HeldError.
func (s *Store) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	st, now, err := s.lock("acquire")
	if err != nil {
		return driver.Grant{}, err
	}
	defer st.mu.Unlock()
	k := st.keys[r.Key]
	if k == nil {
		k = &record{readers: make(map[string]reader)}
		st.keys[r.Key] = k
	}
	k.queue = fifo.Live(k.queue, st.nanos(now))
	k.prune(now)
	ahead := fifo.Ahead(k.queue, r.Token)
	switch {
	case k.holds(r.Token, now): // a retried Acquire: same fence, new TTL
		k.holder, k.expires = r.Holder, now.Add(r.TTL)
		return driver.Grant{Fence: k.fence}, nil
	case k.reads(r.Token, now): // a reader's retried Acquire, whoever waits
		k.readers[r.Token] = reader{holder: r.Holder, expires: now.Add(r.TTL)}
		return driver.Grant{Fence: k.fence}, nil
	case r.Shared && !k.held(now) && fifo.WritersAhead(k.queue, r.Token) == 0:
		if len(k.readers) == 0 { // a new read epoch
			k.fence++
		}
		k.queue, _ = fifo.Dequeue(k.queue, r.Token)
		k.readers[r.Token] = reader{holder: r.Holder, expires: now.Add(r.TTL)}
		return driver.Grant{Fence: k.fence}, nil
	case !r.Shared && !k.held(now) && len(k.readers) == 0 && ahead == 0:
		k.queue, _ = fifo.Dequeue(k.queue, r.Token)
		k.token, k.holder, k.fence, k.expires = r.Token, r.Holder, k.fence+1, now.Add(r.TTL)
		return driver.Grant{Fence: k.fence}, nil
	}
	if r.Queue { // queue r.Token, or refresh its entry
		var err error
		w := fifo.Waiter{Token: r.Token, Expires: st.nanos(now.Add(r.TTL)), Shared: r.Shared}
		if k.queue, err = fifo.Enqueue(k.queue, r.Key, w, st.caps.MaxWaiters); err != nil {
			return driver.Grant{}, fmt.Errorf("memlease: acquire %q: %w", r.Key, err)
		}
	}
	held := &lease.HeldError{Key: r.Key, Queued: ahead}
	if info := k.info(r.Key, now); info.Held {
		held.Holder, held.Fence, held.Remaining = info.Holder, info.Fence, info.Remaining
	}
	return driver.Grant{}, held
}

// AcquireMany acquires every request as Acquire would, in order.
func (s *Store) AcquireMany(ctx context.Context, rs []driver.Request) ([]driver.Grant, []error) {
	gs, errs := make([]driver.Grant, len(rs)), make([]error, len(rs))
	for i, r := range rs {
		gs[i], errs[i] = s.Acquire(ctx, r)
	}
	return gs, errs
}

// Renew extends the lease to r.TTL from now if r.Token still holds r.Key;
// a token whose hold was broken gets an error matching lease.ErrBroken.
func (s *Store) Renew(ctx context.Context, r driver.Request) error {
	return s.RenewMany(ctx, []driver.Request{r})[0]
}

// RenewMany renews every request as Renew would, at one instant.
func (s *Store) RenewMany(ctx context.Context, rs []driver.Request) []error {
	errs := make([]error, len(rs))
	st, now, err := s.lock("renew")
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer st.mu.Unlock()
	for i, r := range rs {
		k := st.keys[r.Key]
		switch {
		case k.holds(r.Token, now):
			k.expires = now.Add(r.TTL)
		case k.reads(r.Token, now):
			k.readers[r.Token] = reader{holder: k.readers[r.Token].holder, expires: now.Add(r.TTL)}
		default:
			errs[i] = k.brokenErr("renew", r.Key, r.Token, now)
		}
	}
	return errs
}

// Release frees r.Key if r.Token holds it, or takes r.Token out of the key's
// queue, and announces the key when it is free.
func (s *Store) Release(ctx context.Context, r driver.Request) error {
	st, now, err := s.lock("release")
	if err != nil {
		return err
	}
	defer st.mu.Unlock()
	k := st.keys[r.Key]
	if k.holds(r.Token, now) {
		k.token = ""
		st.announce(r.Key, k, now)
		return nil
	}
	if k.reads(r.Token, now) {
		delete(k.readers, r.Token)
		if k.prune(now); len(k.readers) == 0 { // the last reader: the key is free
			st.announce(r.Key, k, now)
		}
		return nil
	}
	if k != nil {
		var left bool
		// The waiter leaving may have been the head: the next one may look.
		if k.queue, left = fifo.Dequeue(k.queue, r.Token); left && !k.held(now) {
			st.announce(r.Key, k, now)
		}
	}
	return fmt.Errorf("memlease: release %q: %w", r.Key, lease.ErrNotHeld)
}

// ReleaseMany releases every request as Release would, in order.
func (s *Store) ReleaseMany(ctx context.Context, rs []driver.Request) []error {
	errs := make([]error, len(rs))
	for i, r := range rs {
		errs[i] = s.Release(ctx, r)
	}
	return errs
}

// Inspect reports who holds key.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	st, now, err := s.lock("inspect")
	if err != nil {
		return driver.Info{}, err
	}
	defer st.mu.Unlock()
	return st.keys[key].info(key, now), nil
}

// Close closes this handle and the subscriptions opened through it; the keys
// and other handles are not affected. Closing twice is harmless.
func (s *Store) Close() error {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.closed = true
	for sub := range s.st.subs {
		if sub.owner == s {
			sub.closeLocked(ErrClosed)
		}
	}
	return nil
}

// lock locks the shared state unless s is closed, and reads the clock.
// Operations never block, so they ignore ctx.
func (s *Store) lock(op string) (*state, time.Time, error) {
	s.st.mu.Lock()
	if s.closed {
		s.st.mu.Unlock()
		return nil, time.Time{}, fmt.Errorf("memlease: %s: %w", op, ErrClosed)
	}
	return s.st, s.st.clock.Now(), nil
}

// nanos is t in nanoseconds since the store's epoch, the unit of fifo.
func (st *state) nanos(t time.Time) int64 { return int64(t.Sub(st.epoch)) }

// held reports whether k has a live holder; k may be nil.
func (k *record) held(now time.Time) bool { return k != nil && k.token != "" && now.Before(k.expires) }

// holds reports whether token is k's live holder; k may be nil.
func (k *record) holds(token string, now time.Time) bool { return k.held(now) && k.token == token }

// reads reports whether token is a live reader of k; k may be nil.
func (k *record) reads(token string, now time.Time) bool {
	return k != nil && now.Before(k.readers[token].expires)
}

// prune forgets k's expired readers.
func (k *record) prune(now time.Time) {
	for tok, rd := range k.readers {
		if !now.Before(rd.expires) {
			delete(k.readers, tok)
		}
	}
}

// info describes k's live holder: its writer, or the reader that expires
// last; k may be nil.
func (k *record) info(key string, now time.Time) driver.Info {
	switch {
	case k.held(now):
		return driver.Info{Key: key, Held: true, Holder: k.holder, Fence: k.fence, Remaining: k.expires.Sub(now)}
	case k == nil:
		return driver.Info{Key: key}
	}
	k.prune(now)
	info := driver.Info{Key: key, Readers: len(k.readers)}
	for _, rd := range k.readers {
		if d := rd.expires.Sub(now); d > info.Remaining {
			info.Held, info.Shared, info.Holder, info.Fence, info.Remaining = true, true, rd.holder, k.fence, d
		}
	}
	if !info.Held {
		info.Readers = 0
	}
	return info
}

// plainStore embeds the interface, so its method set is driver.Store's alone.
type plainStore struct{ driver.Store }

// Caps reports the inner store's limits without FIFO.
func (p plainStore) Caps() driver.Caps {
	c := p.Store.Caps()
	c.FIFO, c.MaxWaiters = false, 0
	return c
}

// Plain returns s without FIFO and without the optional interfaces: a Client
// over it renews lease by lease, waits for holders' TTLs instead of
// announcements and lets its waiters race. Closing it closes s.
func Plain(s *Store) driver.Store { return plainStore{s} }

// ErrOverflow ends a subscription (Next returns it, wrapped) whose reader
// fell more than MaxPending announcements behind.
var ErrOverflow = errors.New("memlease: subscription overflowed, announcements were missed")

// MaxPending is how many unread announcements a subscription holds.
const MaxPending = 1024

// subscription is a driver.Subscription: announce sends into ch under st.mu,
// without blocking; Next receives.
type subscription struct {
	st    *state
	owner *Store
	ch    chan driver.Announcement
	err   error // why ch was closed
}

// Subscribe opens a subscription to the releases of every key, through any
// handle. It ends when it or this handle is closed.
func (s *Store) Subscribe(ctx context.Context) (driver.Subscription, error) {
	st, _, err := s.lock("subscribe")
	if err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	sub := &subscription{st: st, owner: s, ch: make(chan driver.Announcement, MaxPending)}
	st.subs[sub] = struct{}{}
	return sub, nil
}

// announce tells every subscription that key is free, naming the live head
// of its queue; st.mu is held.
func (st *state) announce(key string, k *record, now time.Time) {
	a := driver.Announcement{Key: key}
	k.queue = fifo.Live(k.queue, st.nanos(now))
	a.Next = fifo.Next(k.queue)
	for sub := range st.subs {
		select {
		case sub.ch <- a:
		default: // the reader missed this one: end the subscription
			sub.closeLocked(ErrOverflow)
		}
	}
}

// Next returns the next announcement, waiting until there is one or ctx
// ends; then the error that ended the subscription.
func (sub *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	select {
	case a, open := <-sub.ch:
		if !open {
			return driver.Announcement{}, sub.err
		}
		return a, nil
	case <-ctx.Done():
		return driver.Announcement{}, fmt.Errorf("memlease: next: %w", ctx.Err())
	}
}

// Close ends the subscription and unblocks Next. Closing twice is harmless.
func (sub *subscription) Close() error {
	sub.st.mu.Lock()
	defer sub.st.mu.Unlock()
	sub.closeLocked(ErrClosed)
	return nil
}

// closeLocked ends the subscription: Next returns the announcements still
// in ch, then err; st.mu is held.
func (sub *subscription) closeLocked(err error) {
	if _, open := sub.st.subs[sub]; open {
		delete(sub.st.subs, sub) // no send after this: close(ch) is safe
		sub.err = fmt.Errorf("memlease: next: %w", err)
		close(sub.ch)
	}
}
