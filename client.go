package lease

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/leasekit/lease/driver"
)

// Client acquires leases in one store and renews them in the background. It
// is safe for concurrent use; Close it to release its leases.
type Client struct {
	store driver.Store
	batch driver.BatchRenewer // nil when the store cannot batch
	fifo  bool                // Acquire queues waiters
	caps  driver.Caps
	def   params        // the Client's lease settings, before acquire options
	idle  time.Duration // the longest the heartbeat sleeps
	obs   []Observer
	log   *slog.Logger
	clock Clock
	hub   *hub
	ids   atomic.Uint64 // the last Lease.id

	// The coalesced acquisitions and releases (coalesce.go); nil when the
	// store cannot batch them.
	acquirer *batcher[driver.Grant]
	releaser *batcher[struct{}]

	mu       sync.Mutex
	leases   map[*Lease]struct{}
	byKey    map[string]*Lease              // a Client holds a key once
	lost     map[<-chan struct{}]*lostWatch // one watch per Grant.Lost channel
	closed   bool
	draining bool                    // Close waits for goroutines: spawn runs work inline
	wg       sync.WaitGroup          // every goroutine the Client starts
	wakeAt   time.Time               // when the heartbeat plans to wake
	waits    map[*WaitState]struct{} // the acquisitions waiting now (Snapshot)
	piece    int                     // the most leases per RenewMany call; 0: a round is one call
	recent   eventRing

	emitMu sync.Mutex // keeps observer events in the order decided under mu
	wake   chan struct{}
	stop   chan struct{}
}

// New returns a Client for store. Options set the defaults of every lease it
// acquires; invalid options return an error matching ErrInvalid.
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
	cfg.holder = cmp.Or(cfg.holder, defaultHolder())
	c := &Client{
		store: store, caps: store.Caps(), def: cfg.params, obs: cfg.observers, log: cfg.logger, clock: cfg.clock,
		leases: make(map[*Lease]struct{}), byKey: make(map[string]*Lease), waits: make(map[*WaitState]struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	if c.caps.MaxWaiters < 0 || c.caps.MaxWaiters > driver.MaxMaxWaiters {
		return nil, Invalid("store", "max waiters %d is not between 1 and %d", c.caps.MaxWaiters, driver.MaxMaxWaiters)
	}
	if c.def.ttl == 0 && c.caps.MaxTTL > 0 && c.caps.MaxTTL < DefaultTTL {
		c.def.ttl = c.caps.MaxTTL // a TTL nobody chose fits the store
	}
	c.batch, _ = store.(driver.BatchRenewer)
	c.newBatchers()
	c.fifo = c.caps.FIFO && cfg.fifo
	rp, err := c.def.resolve(c.caps)
	if err != nil {
		return nil, err
	}
	c.idle = rp.renew
	c.hub = newHub(c)
	c.wg.Go(c.heartbeat)
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
	p.ttl = cmp.Or(p.ttl, c.def.ttl) // WithTTL(0) on an acquisition: the Client's
	if err := c.validKey(key); err != nil {
		return p, err
	}
	if p.shared && !c.caps.Shared {
		return p, fmt.Errorf("lease: acquire %q shared: the store %T keeps no shared holds: %w", key, c.store, errors.ErrUnsupported)
	}
	return p.resolve(c.caps)
}

func (c *Client) validKey(key string) error {
	max := min(MaxKeyLen, cmp.Or(c.caps.MaxKeyLen, MaxKeyLen))
	switch {
	case key == "":
		return Invalid("key", "empty")
	case len(key) > max:
		return Invalid("key", "%d bytes, longer than the limit of %d", len(key), max)
	case !utf8.ValidString(key):
		return Invalid("key", "not valid UTF-8")
	case strings.IndexByte(key, 0) >= 0:
		return Invalid("key", "contains a NUL byte")
	}
	return nil
}

// TryAcquire acquires key if it is free and returns at once otherwise, with
// a *HeldError. Unless WithReentrant, a key this Client holds is refused
// (HeldError.Self), whichever goroutine asks.
func (c *Client) TryAcquire(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	p, err := c.prepare(key, opts)
	return c.run(ctx, key, p, err, func(start time.Time) (*Lease, error) {
		return c.attempt(ctx, c.request(key, p, false), p, start, new(time.Time))
	})
}

// Acquire acquires key, waiting while another holder has it, until ctx ends
// or the Client is closed. It wakes on the store's release announcement or
// when the holder's TTL would run out. With a FIFO store the key goes to the
// longest waiter (see WithFIFO); a full queue is a *QueueFullError at once.
// When ctx ends, the error is the last refusal, a *HeldError that matches
// ctx's error too.
func (c *Client) Acquire(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	p, err := c.prepare(key, opts)
	return c.run(ctx, key, p, err, func(start time.Time) (*Lease, error) {
		if l, err := c.own(key, p); l != nil || err != nil {
			return l, err
		}
		req := c.request(key, p, c.fifo) // FIFO: the waiter's place for the whole wait
		var token string                 // the hub wakes a queued waiter only when it is next
		if c.fifo {
			token = req.Token
		}
		var refused time.Time // the start of the last refused attempt: it refreshed the queue entry
		var sent bool         // an attempt may have reached the store
		l, err := c.wait(ctx, key, p, token, []string{key}, func(ctx context.Context) (*Lease, error) {
			if !c.fifo {
				req = c.request(key, p, false) // racing waiters: a new token per attempt
			}
			sent = sent || ctx.Err() == nil
			return c.attempt(ctx, req, p, start, &refused)
		})
		// Failed, or reentered after a refusal: out of the queue, unless no
		// attempt was made (ctx had ended), which leaves nothing to undo.
		if c.fifo && sent && (err != nil || l.req.Token != req.Token) {
			c.drop(req, min(p.renew, callGrace)) // out of the queue, within the same grace
		}
		return l, err
	})
}

// AcquireShared acquires a shared (read) hold of key, waiting as Acquire
// does while a writer holds the key or waits for it ahead of this reader:
// readers hold the key together, and readers that come after a waiting
// writer queue behind it, so writers are not starved (with a FIFO store).
// Every reader of one read epoch gets the same fence; a writer's is larger
// (see the package doc). A store that cannot keep readers refuses with
// errors.ErrUnsupported; a key this Client holds exclusively is refused as
// Acquire refuses it (HeldError.Self). A Client's readers are independent
// holders: an exclusive Acquire of the same Client waits for them.
func (c *Client) AcquireShared(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	return c.Acquire(ctx, key, append(opts[:len(opts):len(opts)], shared)...)
}

// TryAcquireShared acquires a shared hold of key if no writer holds it or
// waits for it, and returns at once otherwise, with a *HeldError. See
// AcquireShared.
func (c *Client) TryAcquireShared(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	return c.TryAcquire(ctx, key, append(opts[:len(opts):len(opts)], shared)...)
}

// shared makes an acquisition a reader's; it is applied last.
var shared LeaseOption = func(p *params) { p.shared, p.reentry = true, false }

// run reports a failed acquisition to the observers; err is its input's.
func (c *Client) run(ctx context.Context, key string, p params, err error, acquire func(start time.Time) (*Lease, error)) (*Lease, error) {
	if err != nil {
		return nil, err
	}
	start := c.clock.Now()
	l, err := acquire(start)
	if err != nil && !errors.Is(err, ErrInvalid) {
		now := c.clock.Now()
		c.mu.Lock()
		ev := Event{Kind: EventAcquireFailed, Key: key, Holder: p.holder, Time: now, Wait: now.Sub(start), Err: err, Context: ctx}
		if p.tag != "" {
			ev.Semaphore = key
		}
		c.unlockEmit(ev)
	}
	return l, err
}

// Do acquires key (waiting as Acquire does), runs fn while holding it and
// releases it, even if fn panics. fn's ctx is cancelled when ctx ends or the
// lease is lost. Do returns fn's error joined with the release error; if fn
// succeeded but the lease was lost meanwhile, the error matches ErrLost.
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
	defer func() {
		stop()
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), l.TTL())
		defer rcancel()
		err = errors.Join(err, l.Release(rctx))
	}()
	return fn(fctx, l)
}

// Info describes the holder of a key, as [Client.Inspect] reports it.
type Info = driver.Info

// Inspect reports who holds key, as the store sees it.
func (c *Client) Inspect(ctx context.Context, key string) (Info, error) {
	if err := c.validKey(key); err != nil {
		return Info{}, err
	}
	info, err := c.store.Inspect(ctx, key)
	if err != nil {
		return Info{}, fmt.Errorf("lease: inspect %q: %w", key, err)
	}
	return info, nil
}

// Close releases the Client's leases and stops its goroutines; it does not
// close the store. Later acquisitions return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	held := slices.Collect(maps.Keys(c.leases))
	for _, l := range held {
		l.holds = 0
	}
	c.mu.Unlock()

	errs := make([]error, len(held))
	var wg sync.WaitGroup
	for i, l := range held {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), min(l.TTL(), 10*time.Second))
			defer cancel()
			if err := l.Release(ctx); errors.Is(err, ErrNotHeld) {
				c.log.Warn("lease: on close, the store no longer held the lease", "key", l.req.Key, "err", err)
			} else if !errors.Is(err, ErrReleased) && !errors.Is(err, ErrLost) {
				errs[i] = err
			}
		})
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

// request returns the store request of an acquisition, with a new token.
func (c *Client) request(key string, p params, queue bool) driver.Request {
	return driver.Request{Key: key, Token: newToken(), Holder: p.holder + p.tag, TTL: p.ttl, Queue: queue, Shared: p.shared}
}

// attempt asks the store for req once. If the store may hold req's token
// although no lease is returned (the write may have landed before an error,
// or the Client closed meanwhile), attempt releases it, unless req queues:
// Acquire then releases it when it gives up. refused is when the last
// refused attempt began (see Grant.FromQueue).
func (c *Client) attempt(ctx context.Context, req driver.Request, p params, start time.Time, refused *time.Time) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lease: acquire %q: %w", req.Key, err)
	}
	if l, err := c.own(req.Key, p); l != nil || err != nil {
		return l, err
	}
	sent := c.clock.Now()
	// The call outlives ctx by a grace, so that its write lands before the
	// caller undoes it.
	g, err := c.storeAcquire(ctx, req, min(p.renew, callGrace))
	switch {
	case errors.Is(err, ErrHeld):
		if l, own := c.own(req.Key, p); l != nil || own != nil {
			return l, own // another goroutine of this Client won meanwhile
		}
		*refused = sent
		return nil, err
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrQueueFull):
		return nil, err // the store wrote nothing
	case err != nil:
		if !req.Queue {
			c.cleanup(req) // the write may have landed
		}
		return nil, fmt.Errorf("lease: acquire %q: %w", req.Key, err)
	}
	from := sent
	if g.FromQueue { // the TTL ran from the last refused attempt
		from = cmp.Or(*refused, start)
	}
	l := newLease(c, req, p, g.Fence, from)
	l.acquired = sent
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if !req.Queue {
			c.cleanup(req)
		}
		return nil, ErrClosed
	}
	c.leases[l] = struct{}{}
	if !req.Shared { // a Client's readers are independent holders
		c.byKey[req.Key] = l
	}
	var watch *lostWatch
	if g.Lost != nil {
		watch = c.watchLostLocked(l, g.Lost)
	}
	c.kickLocked(l.nextRenew)
	ev := l.event(EventAcquired, c.clock.Now())
	ev.Wait, ev.Context = ev.Time.Sub(start), ctx
	c.unlockEmit(ev)
	if watch != nil {
		c.spawn(func() { c.watchLost(watch) })
	}
	if c.log.Enabled(ctx, slog.LevelDebug) { // the arguments cost allocations
		c.log.Debug("lease: acquired", "key", req.Key, "fence", g.Fence, "token", short(req.Token))
	}
	return l, nil
}

// own refuses an acquisition of key with p once c is closed (ErrClosed) or
// while an exclusive lease of c holds key (a *HeldError with Self set),
// unless both are reentrant: it then returns that lease, with one more hold.
func (c *Client) own(key string, p params) (*Lease, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.byKey[key]; l != nil {
		if p.reentry && l.p.reentry {
			l.holds++
			return l, nil
		}
		return nil, &HeldError{Key: key, Holder: l.req.Holder, Fence: l.fence, Self: true, Remaining: max(l.deadline.Sub(c.clock.Now()), 0)}
	}
	if c.closed {
		return nil, ErrClosed
	}
	return nil, nil
}

// forgetLocked removes l from the held leases; the caller holds c.mu.
func (c *Client) forgetLocked(l *Lease) {
	delete(c.leases, l)
	if c.byKey[l.req.Key] == l {
		delete(c.byKey, l.req.Key)
	}
}

// drop releases req's token, which nobody will renew, within timeout; if
// that fails, the store frees it after the TTL.
func (c *Client) drop(req driver.Request, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.storeRelease(ctx, req); err != nil && !errors.Is(err, ErrNotHeld) {
		c.log.Warn("lease: releasing an unused token failed; the store frees it after the TTL", "key", req.Key, "token", short(req.Token), "err", err)
	}
}

// cleanup drops req's token in the background.
func (c *Client) cleanup(req driver.Request) {
	c.spawn(func() { c.drop(req, min(req.TTL, cleanupTimeout)) })
}

// cleanupTimeout bounds the background release of tokens nobody renews.
const cleanupTimeout = 5 * time.Second

// cleanupAll drops the tokens of reqs, leases lost together that nobody
// will renew, in one background goroutine, within the timeout of one drop:
// a batching store takes them in batches, another one by one; what is left
// when the timeout ends expires with its TTL. A mass loss (a session or the
// store's connection gone under thousands of leases) then starts one
// goroutine, not one per lease.
func (c *Client) cleanupAll(reqs []driver.Request) {
	if len(reqs) <= 1 {
		for _, r := range reqs {
			c.cleanup(r)
		}
		return
	}
	c.spawn(func() {
		var ttl time.Duration
		for _, r := range reqs {
			ttl = max(ttl, r.TTL)
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(ttl, cleanupTimeout))
		defer cancel()
		br, batches := c.store.(driver.BatchReleaser)
		batch := 1
		if batches {
			batch = cmp.Or(min(c.caps.MaxBatch, maxBatch), maxBatch)
		}
		failed, last := 0, error(nil)
		for lo := 0; lo < len(reqs); lo += batch {
			chunk := reqs[lo:min(lo+batch, len(reqs))]
			errs := []error{nil}
			if batches {
				errs = br.ReleaseMany(ctx, chunk)
			} else {
				errs[0] = c.store.Release(ctx, chunk[0])
			}
			for _, err := range errs {
				if err != nil && !errors.Is(err, ErrNotHeld) {
					failed, last = failed+1, err
				}
			}
		}
		if failed > 0 {
			c.log.Warn("lease: releasing the tokens of lost leases failed; the store frees them after their TTL", "failed", failed, "of", len(reqs), "err", last)
		}
	})
}

// spawn runs f in a goroutine tracked by Close; while Close is draining it
// runs f inline instead.
func (c *Client) spawn(f func()) {
	c.mu.Lock()
	draining := c.draining
	if !draining {
		c.wg.Go(f)
	}
	c.mu.Unlock()
	if draining {
		f()
	}
}

// unlockEmit records evs among the recent events, releases c.mu, which the
// caller holds, and delivers evs to the observers; taking emitMu first keeps
// events in the order decided under c.mu.
func (c *Client) unlockEmit(evs ...Event) {
	for _, e := range evs {
		c.recent.add(e)
	}
	if len(c.obs) == 0 || len(evs) == 0 {
		c.mu.Unlock()
		return
	}
	c.emitMu.Lock()
	c.mu.Unlock()
	defer c.emitMu.Unlock()
	for _, e := range evs {
		for _, o := range c.obs {
			o.Observe(e)
		}
	}
}

func newToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil { // since Go 1.24 Read crashes instead
		panic("lease: token from crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// short shortens a token for logs: tokens are never logged in full.
func short(token string) string {
	if len(token) > 8 {
		return token[:8] + "…"
	}
	return token
}

// Holder returns the Client's default holder identity.
func (c *Client) Holder() string { return c.def.holder }

// TTL returns the Client's default lease TTL.
func (c *Client) TTL() time.Duration { return cmp.Or(c.def.ttl, DefaultTTL) }
