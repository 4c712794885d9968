package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/leasekit/lease/driver"
)

// Client acquires and keeps leases in one Store. It owns all timing: one
// heartbeat goroutine renews every lease it holds (in one round trip per
// renewal when the store is a BatchRenewer), and one subscription wakes its
// waiters when the store is a Notifier. A Client is safe for concurrent use;
// Close it to release its leases and stop its goroutines.
type Client struct {
	store driver.Store
	batch driver.BatchRenewer // nil when the store cannot batch
	fifo  bool                // Acquire queues waiters (Caps.FIFO, WithFIFO not false)
	caps  driver.Caps
	def   params        // client-wide lease settings, before per-acquire options
	idle  time.Duration // the longest the heartbeat sleeps: the default renew interval
	obs   []Observer    // in the order WithObserver gave them
	log   *slog.Logger
	clock Clock
	hub   *hub

	mu       sync.Mutex
	leases   map[*Lease]struct{}            // held leases
	byKey    map[string]*Lease              // held leases by key: a Client holds a key once
	lost     map[<-chan struct{}]*lostWatch // one watch per Grant.Lost channel (lost.go)
	closed   bool                           // no new leases
	draining bool                           // Close is waiting for goroutines: run work inline
	wg       sync.WaitGroup                 // every goroutine the Client starts

	wakeAt time.Time  // when the heartbeat plans to wake next (guarded by mu)
	emitMu sync.Mutex // keeps observer events in the order they were decided
	wake   chan struct{}
	stop   chan struct{}
}

// New returns a Client for store. Options set the defaults of every lease the
// Client acquires; invalid options return an error matching ErrInvalid.
func New(store driver.Store, opts ...Option) (*Client, error) {
	if store == nil {
		return nil, Invalid("store", "nil store")
	}
	cfg := config{clock: SystemClock(), logger: slog.New(slog.DiscardHandler), fifo: true}
	for _, o := range opts {
		if o == nil {
			return nil, Invalid("option", "nil option")
		}
		o.applyClient(&cfg)
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	if cfg.holder == "" {
		cfg.holder = defaultHolder()
	}
	c := &Client{
		store:  store,
		def:    cfg.params,
		obs:    cfg.observers,
		log:    cfg.logger,
		clock:  cfg.clock,
		leases: make(map[*Lease]struct{}),
		byKey:  make(map[string]*Lease),
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	c.caps = store.Caps()
	if c.caps.MaxWaiters < 0 || c.caps.MaxWaiters > driver.MaxMaxWaiters {
		return nil, Invalid("store", "max waiters %d is not between 1 and %d", c.caps.MaxWaiters, driver.MaxMaxWaiters)
	}
	c.batch, _ = store.(driver.BatchRenewer)
	c.fifo = c.caps.FIFO && cfg.fifo
	rp, err := c.def.resolve(c.caps)
	if err != nil {
		return nil, err
	}
	c.idle = rp.renew
	c.hub = newHub(c)
	c.wg.Add(1)
	go c.heartbeat()
	return c, nil
}

// prepare validates key and resolves the lease settings for one acquisition.
func (c *Client) prepare(key string, opts []AcquireOption) (params, error) {
	p := c.def
	for _, o := range opts {
		if o == nil {
			return p, Invalid("option", "nil acquire option")
		}
		o.applyAcquire(&p)
	}
	if p.ttl == 0 {
		p.ttl = c.def.ttl // WithTTL(0) on an acquisition: the Client's TTL
	}
	if err := c.validKey(key); err != nil {
		return p, err
	}
	return p.resolve(c.caps)
}

func (c *Client) validKey(key string) error {
	max := MaxKeyLen
	if c.caps.MaxKeyLen > 0 && c.caps.MaxKeyLen < max {
		max = c.caps.MaxKeyLen
	}
	switch {
	case key == "":
		return Invalid("key", "empty")
	case len(key) > max:
		return Invalid("key", "%d bytes, longer than the limit of %d", len(key), max)
	case !utf8.ValidString(key):
		return Invalid("key", "not valid UTF-8")
	}
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return Invalid("key", "contains a NUL byte")
		}
	}
	return nil
}

// TryAcquire acquires key if it is free and returns at once otherwise, with
// an error matching ErrHeld (a *HeldError telling who holds it, when the
// store can tell).
//
// Leases are not reentrant: a key this Client already holds is refused at
// once, without a round trip, with a *HeldError whose Self is set (from
// TryAcquire, Acquire and Do alike). Goroutines that share a Client share
// its leases: to exclude each other they need a lock of their own. A
// semaphore's slots are separate keys, so a Client may hold several slots.
func (c *Client) TryAcquire(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	p, err := c.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	start := c.clock.Now()
	l, err := c.try(ctx, key, p, start)
	if err != nil {
		return nil, c.failed(key, p, start, err)
	}
	return l, nil
}

// Acquire acquires key, waiting while another holder has it, until ctx ends
// or the Client is closed (ErrClosed); a key this Client holds is refused at
// once (see TryAcquire). It never busy-polls: it wakes on the
// store's release announcement when the store is a Notifier, and otherwise
// when the holder's TTL would run out.
//
// With a store that queues waiters (Caps.FIFO; every leasekit store does),
// waiting is FIFO: the key goes to the client that has waited longest, and
// neither the releaser nor a newcomer can take it meanwhile. Acquire keeps
// one token for the whole wait, refreshes its place in the queue at least
// every renew interval, and leaves the queue when it gives up. WithFIFO(false)
// turns this off: waiters then race.
//
// When the key's queue is full (the store's cap of waiters per key),
// Acquire returns a *QueueFullError matching ErrQueueFull at once,
// without waiting: the caller decides whether to try again later.
//
// When ctx ends, Acquire returns a *HeldError matching both ErrHeld and
// ctx's error: the last refusal (who held the key, with which fence), how
// long it waited (Waited) and ctx's error (Err). If the store refused no
// attempt by then, the error matches ctx's error only.
//
// When ctx ends during a store call, Acquire lets that call finish (for at
// most min(renew interval, 1s)) before it leaves the queue, so that a write
// the store makes after all cannot keep the key reserved; a grant that
// arrives meanwhile is returned.
func (c *Client) Acquire(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	p, err := c.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	start := c.clock.Now()
	l, err := c.acquire(ctx, key, p, start)
	if err != nil {
		return nil, c.failed(key, p, start, err)
	}
	return l, nil
}

// acquire is Acquire after its input was checked.
func (c *Client) acquire(ctx context.Context, key string, p params, start time.Time) (*Lease, error) {
	if err := c.own(key); err != nil {
		return nil, err
	}
	// In FIFO mode the token is the waiter's place in the queue: it stays
	// the same across attempts and is released (leaving the queue, or
	// freeing a lease whose grant we did not see) when Acquire gives up.
	var queued driver.Request
	if c.fifo {
		var err error
		if queued, err = c.request(key, p, true); err != nil {
			return nil, err
		}
	}
	w := &lazyWaiter{h: c.hub, token: queued.Token, key: key}
	defer w.unregister()
	l, err := c.wait(ctx, key, p, start, w, queued)
	if err != nil && c.fifo {
		c.leaveQueue(queued)
	}
	return l, err
}

// lazyWaiter registers an Acquire's waiter with the hub only once the
// waiter can be woken (a subscription is active) or must sleep: an
// acquisition whose first attempt succeeds without a subscription registers
// nothing.
type lazyWaiter struct {
	h     *hub
	token string
	key   string
	w     *waiter
}

func (lw *lazyWaiter) get() *waiter {
	if lw.w == nil {
		lw.w = lw.h.register(lw.token, lw.key)
	}
	return lw.w
}

func (lw *lazyWaiter) unregister() {
	if lw.w != nil {
		lw.h.unregister(lw.w)
	}
}

// leaveQueue releases a waiter's token before Acquire returns, so that the
// caller is out of the queue (and holds nothing) once Acquire has failed. It
// is bounded: if the store cannot be reached, the entry expires after its TTL.
func (c *Client) leaveQueue(req driver.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), min(req.TTL/3, time.Second))
	defer cancel()
	if err := c.store.Release(ctx, req); err != nil && !errors.Is(err, ErrNotHeld) {
		c.log.Warn("lease: leaving the queue failed; the entry expires after the TTL", "key", req.Key, "token", short(req.Token), "err", err)
	}
}

// wait is Acquire's loop; queued is the FIFO request, or zero when waiters
// race (each attempt then has a new token).
func (c *Client) wait(ctx context.Context, key string, p params, start time.Time, lw *lazyWaiter, queued driver.Request) (*Lease, error) {
	var transient int
	var last *HeldError // the last refusal, for the error when ctx ends
	for first := true; ; first = false {
		// The subscription is made before an attempt, so that a release
		// after the attempt reaches the waiter; but not before the first
		// attempt of a Client that has none yet: a free key needs no
		// subscription (uncontended acquisitions stay one round trip and
		// no announcement is sent to this Client). A refused first attempt
		// subscribes and looks again at once.
		var gen uint64
		if !first || c.hub.active() {
			gen = c.hub.ensure(ctx)
		}
		if gen != 0 {
			lw.get() // before the attempt: a release after it wakes us
		}
		var l *Lease
		var err error
		if queued.Token != "" {
			l, err, _ = c.attempt(ctx, queued, p, start) // dirty: released when Acquire gives up
		} else {
			l, err = c.try(ctx, key, p, start)
		}
		if err == nil {
			return l, nil
		}
		var sleep time.Duration
		var held *HeldError
		switch {
		case errors.As(err, &held) && held.Self:
			return nil, err // another goroutine's acquisition won meanwhile
		case errors.As(err, &held):
			transient, last = 0, held
			// Queued counts the live waiters ahead of our token: none
			// means we are the head of the key's queue.
			sleep = waitFor(held.Remaining, p, !(queued.Queue && held.Queued == 0))
		case errors.Is(err, ErrHeld):
			transient, last = 0, &HeldError{Key: key}
			sleep = waitFor(0, p, true)
		case ctx.Err() != nil:
			return nil, c.gaveUp(key, last, start, ctx.Err())
		case errors.Is(err, ErrInvalid), errors.Is(err, ErrClosed), errors.Is(err, ErrQueueFull):
			return nil, err
		default:
			transient++
			sleep = backoff(transient, p.renew)
			c.log.Warn("lease: acquire failed, retrying", "key", key, "err", err, "retry_in", sleep)
		}
		if queued.Token != "" {
			// Refresh the place in the queue well before it expires (a TTL
			// after the last attempt).
			sleep = min(sleep, p.renew)
		}
		if first && gen == 0 && c.hub.notifier != nil {
			continue // subscribe, then look again at once
		}
		if c.hub.changed(gen) {
			continue // the subscription was (re)established: look again at once
		}
		if err := c.pause(ctx, sleep, lw.get()); err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, fmt.Errorf("lease: acquire %q: %w", key, err)
			}
			return nil, c.gaveUp(key, last, start, err)
		}
	}
}

// gaveUp returns the error of an acquisition of key, started at start, that
// gave up waiting because its ctx ended with cause: the last refusal, with
// the wait and the cause, so that it matches both ErrHeld and cause. Without
// a refusal it is cause, wrapped.
func (c *Client) gaveUp(key string, last *HeldError, start time.Time, cause error) error {
	waited := c.clock.Now().Sub(start)
	if last == nil {
		return fmt.Errorf("lease: acquire %q: gave up after %v: %w", key, waited.Round(time.Millisecond), cause)
	}
	he := *last
	he.Key, he.Err, he.Waited = key, cause, waited
	return &he
}

// pause sleeps for d or until w is woken (a release was announced); it
// returns ctx's error when ctx ends and ErrClosed when the Client closes.
func (c *Client) pause(ctx context.Context, d time.Duration, w *waiter) error {
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return ErrClosed
	case <-w.ch:
	case <-t.C():
	}
	return nil
}

// Do acquires key (waiting as Acquire does), runs fn while holding it and
// releases it. fn's ctx is cancelled when ctx ends or the lease is lost. Do
// returns fn's error, joined with the release error if there is one; when
// fn succeeded but the lease was lost meanwhile, the error matches ErrLost.
// If fn panics, Do releases the lease and the panic goes on with its value:
// a caller that recovers (net/http does) leaves nothing held.
func (c *Client) Do(ctx context.Context, key string, fn func(ctx context.Context, l *Lease) error, opts ...AcquireOption) (err error) {
	if fn == nil {
		return Invalid("function", "nil")
	}
	l, err := c.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	// Deferred, so that it also runs while fn's panic (or Goexit) unwinds.
	defer func() {
		stop()
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), l.p.ttl)
		defer rcancel()
		err = errors.Join(err, l.Release(rctx))
	}()
	return fn(fctx, l)
}

// Inspect reports who holds key, as the store sees it.
func (c *Client) Inspect(ctx context.Context, key string) (Info, error) {
	if err := c.validKey(key); err != nil {
		return Info{}, err
	}
	info, err := c.store.Inspect(ctx, key)
	if err != nil {
		return Info{}, fmt.Errorf("lease: inspect %q: %w", key, err)
	}
	return Info(info), nil
}

// Info describes the holder of a key, as [Client.Inspect] reports it.
type Info struct {
	// Key is the lease name.
	Key string
	// Held is false when nobody holds the key; the other fields are then zero
	// except Fence, which a store may set to the last fence it granted.
	Held bool
	// Holder is the holder's identity, if the store keeps it.
	Holder string
	// Fence is the holder's fencing token.
	Fence uint64
	// Remaining is the store's view of the time left before the lease
	// expires; 0 when it cannot tell.
	Remaining time.Duration
}

// Close releases every lease the Client holds (their Err becomes ErrReleased),
// stops the heartbeat and the subscription, and waits for all goroutines of
// the Client to exit. It does not close the Store. It returns the release
// errors other than "already gone" (a lease the store had already expired is
// only logged). Close is idempotent; later acquisitions return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	held := make([]*Lease, 0, len(c.leases))
	for l := range c.leases {
		held = append(held, l)
	}
	c.mu.Unlock()

	errs := make([]error, len(held))
	var wg sync.WaitGroup
	for i, l := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), min(l.p.ttl, 10*time.Second))
			defer cancel()
			err := l.Release(ctx)
			switch {
			case err == nil, errors.Is(err, ErrReleased), errors.Is(err, ErrLost):
			case errors.Is(err, ErrNotHeld):
				// Gone already (expired or taken over): nothing left to free.
				c.log.Warn("lease: on close, the store no longer held the lease", "key", l.req.Key, "err", err)
			default:
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	close(c.stop)
	c.hub.close()
	c.mu.Lock()
	c.draining = true
	c.mu.Unlock()
	c.wg.Wait()
	return errors.Join(errs...)
}

// try makes one acquisition attempt with a new token, and frees the token
// if the attempt's outcome is unknown.
func (c *Client) try(ctx context.Context, key string, p params, start time.Time) (*Lease, error) {
	req, err := c.request(key, p, false)
	if err != nil {
		return nil, err
	}
	l, err, dirty := c.attempt(ctx, req, p, start)
	if dirty {
		c.cleanup(req)
	}
	return l, err
}

// request returns the store request of an acquisition, with a new token.
func (c *Client) request(key string, p params, queue bool) (driver.Request, error) {
	token, err := newToken()
	if err != nil {
		return driver.Request{}, err
	}
	return driver.Request{Key: key, Token: token, Holder: p.holder + p.tag, TTL: p.ttl, Queue: queue}, nil
}

// attempt asks the store for req once. dirty reports that the store may hold
// req's token although no lease was returned (the write may have reached the
// store before an error, or the Client closed meanwhile): the caller must
// release the token, now or when it stops using it.
func (c *Client) attempt(ctx context.Context, req driver.Request, p params, start time.Time) (l *Lease, err error, dirty bool) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lease: acquire %q: %w", req.Key, err), false
	}
	if c.isClosed() {
		return nil, ErrClosed, false
	}
	if err := c.own(req.Key); err != nil {
		return nil, err, false
	}
	sent := c.clock.Now()
	// The call may outlive ctx by a grace (see graceCtx): the caller undoes
	// a write it did not see (leaveQueue, cleanup) only after the write.
	sctx, stop := graceCtx(ctx, min(p.renew, callGrace))
	g, err := c.store.Acquire(sctx, req)
	stop()
	if err != nil {
		if errors.Is(err, ErrHeld) {
			// Refused because another goroutine's acquisition of the key
			// won meanwhile: say so when it is known by now.
			if own := c.own(req.Key); own != nil {
				return nil, own, false
			}
			return nil, err, false
		}
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrQueueFull) {
			return nil, err, false // the store wrote nothing
		}
		// The write may have reached the store even though we saw an error
		// (a timeout, a cancelled ctx).
		return nil, fmt.Errorf("lease: acquire %q: %w", req.Key, err), true
	}
	l = newLease(c, req, p, g.Fence, sent)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed, true
	}
	c.leases[l] = struct{}{}
	c.byKey[req.Key] = l
	var watch *lostWatch
	if g.Lost != nil {
		watch = c.watchLostLocked(l, g.Lost)
	}
	c.kickLocked(l.nextRenew)
	ev := l.event(EventAcquired, sent)
	ev.Wait = sent.Sub(start)
	c.unlockEmit(ev)
	if watch != nil {
		c.spawn(func() { c.watchLost(watch) })
	}
	if c.log.Enabled(ctx, slog.LevelDebug) { // the arguments cost allocations
		c.log.Debug("lease: acquired", "key", req.Key, "fence", g.Fence, "token", short(req.Token))
	}
	return l, nil, false
}

// own returns the refusal of an acquisition of key while a lease of c holds
// it (a *HeldError with Self set), or nil.
func (c *Client) own(key string) error {
	c.mu.Lock()
	l := c.byKey[key]
	if l == nil {
		c.mu.Unlock()
		return nil
	}
	he := &HeldError{Key: key, Holder: l.req.Holder, Fence: l.fence, Self: true}
	deadline := l.deadline
	c.mu.Unlock()
	he.Remaining = max(deadline.Sub(c.clock.Now()), 0)
	return he
}

// forgetLocked removes l from the held leases; the caller holds c.mu.
func (c *Client) forgetLocked(l *Lease) {
	delete(c.leases, l)
	if c.byKey[l.req.Key] == l {
		delete(c.byKey, l.req.Key)
	}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// cleanup releases req's token in the background, bounded in time; used
// where a write may have happened that nobody will renew.
func (c *Client) cleanup(req driver.Request) {
	c.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), min(req.TTL, 5*time.Second))
		defer cancel()
		if err := c.store.Release(ctx, req); err != nil && !errors.Is(err, ErrNotHeld) {
			c.log.Warn("lease: cleanup release failed; the store frees it after the TTL", "key", req.Key, "token", short(req.Token), "err", err)
		}
	})
}

// spawn runs f in a goroutine tracked by Close; while Close is draining it
// runs f inline instead.
func (c *Client) spawn(f func()) {
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		f()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// unlockEmit releases c.mu, which the caller holds, and delivers evs to the
// observers. Taking emitMu before releasing c.mu keeps events in the order in
// which they were decided under c.mu.
func (c *Client) unlockEmit(evs ...Event) {
	if len(c.obs) == 0 || len(evs) == 0 {
		c.mu.Unlock()
		return
	}
	c.emitMu.Lock()
	c.mu.Unlock()
	defer c.emitMu.Unlock()
	c.deliver(evs)
}

// emit delivers ev, which no state change under c.mu decided, to the observers.
func (c *Client) emit(ev Event) {
	if len(c.obs) == 0 {
		return
	}
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	c.deliver([]Event{ev})
}

// deliver passes each event to every observer; the caller holds emitMu.
func (c *Client) deliver(evs []Event) {
	for _, e := range evs {
		for _, o := range c.obs {
			o.Observe(e)
		}
	}
}

// failed reports a failed acquisition of key, started at start, to the
// observers and returns err. Invalid input is not reported: it is the
// caller's bug, rejected before any attempt.
func (c *Client) failed(key string, p params, start time.Time, err error) error {
	if len(c.obs) == 0 || errors.Is(err, ErrInvalid) {
		return err
	}
	now := c.clock.Now()
	c.emit(Event{Kind: EventAcquireFailed, Key: key, Holder: p.holder, Time: now, Wait: now.Sub(start), Err: err})
	return err
}

func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lease: token from crypto/rand: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// short shortens a token for logs: tokens are never logged in full.
func short(token string) string {
	if len(token) > 8 {
		return token[:8] + "…"
	}
	return token
}
