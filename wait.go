package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leasekit/lease/driver"
)

// Waiting, written once for Acquire and AcquireSemaphore: the waiter sleeps
// until the holder's TTL would run out, or until the Client's one release
// subscription (a hub shared by its waiters) wakes it. See docs/design.md.

// wait calls try until it returns a lease or a final error. key names the
// acquisition in errors; keys are the store keys whose releases wake the
// waiter; token is its queued token ("" when it does not queue).
func (c *Client) wait(ctx context.Context, key string, p params, token string, keys []string, try func(context.Context) (*Lease, error)) (*Lease, error) {
	start := c.clock.Now()
	// The hub's waiter and the Snapshot's WaitState cost allocations and
	// locks, so an acquisition granted at its first attempt, without a
	// subscription, makes neither.
	var w *waiter
	var ws *WaitState
	defer func() {
		if w != nil {
			c.hub.unregister(w)
		}
		if ws != nil {
			c.endWait(ws)
		}
	}()
	var transient int
	var last *HeldError // the last refusal, for the error when ctx ends
	for first := true; ; first = false {
		// The same for the subscription, but a first attempt needs none
		// unless the Client has one already.
		var gen uint64
		if !first || c.hub.current() != 0 {
			gen = c.hub.ensure(ctx)
		}
		if w == nil && (!first || gen != 0) {
			w = c.hub.register(token, keys) // before an attempt: a release after it wakes us
		}
		l, err := try(ctx)
		if err == nil {
			return l, nil
		}
		if ws == nil {
			ws = c.startWait(key, p, token, start)
		}
		var sleep time.Duration
		var held *HeldError
		switch {
		case errors.Is(err, ErrHeld):
			if !errors.As(err, &held) {
				held = &HeldError{Key: key}
			} else if held.Self {
				return nil, err // another goroutine of this Client won the key
			}
			transient, last = 0, held
			c.refusedWait(ws, held)
			// The head of a FIFO queue (Queued == 0) looks as soon as it can.
			sleep = waitFor(held.Remaining, p, token == "" || held.Queued > 0)
		case ctx.Err() != nil:
			return nil, c.gaveUp(key, last, start, ctx.Err())
		case errors.Is(err, ErrInvalid), errors.Is(err, ErrClosed), errors.Is(err, ErrQueueFull), errors.Is(err, ErrCorrupt):
			return nil, err
		default:
			transient++
			sleep = backoff(transient, p.renew)
			c.log.Warn("lease: acquire failed, retrying", "key", key, "err", err, "retry_in", sleep)
		}
		if token != "" {
			sleep = min(sleep, p.renew) // refresh the place in the queue
		}
		if cur := c.hub.current(); first && gen == 0 && c.hub.notifier != nil || cur != 0 && cur != gen {
			continue // (re)subscribed: look again at once
		}
		if w == nil { // a first attempt without a subscription (no notifier)
			w = c.hub.register(token, keys)
		}
		t := c.clock.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, c.gaveUp(key, last, start, ctx.Err())
		case <-c.stop:
			t.Stop()
			return nil, fmt.Errorf("lease: acquire %q: %w", key, ErrClosed)
		case <-w.ch:
			t.Stop()
		case <-t.C():
		}
	}
}

// gaveUp returns the error of an acquisition that gave up because its ctx
// ended with cause: the last refusal, matching both ErrHeld and cause, or
// without one, cause wrapped.
func (c *Client) gaveUp(key string, last *HeldError, start time.Time, cause error) error {
	waited := c.clock.Now().Sub(start)
	if last == nil {
		return fmt.Errorf("lease: acquire %q: gave up after %v: %w", key, waited.Round(time.Millisecond), cause)
	}
	he := *last
	he.Key, he.Err, he.Waited = key, cause, waited
	return &he
}

// WaitRelease blocks until the store announces that key may have been
// released (true: a hint to look again), d passes (false), ctx ends or the
// Client closes. Without announcements it sleeps for d.
func (c *Client) WaitRelease(ctx context.Context, key string, d time.Duration) (bool, error) {
	if err := c.validKey(key); err != nil {
		return false, err
	}
	w := c.hub.register("", []string{key})
	defer c.hub.unregister(w)
	c.hub.ensure(ctx)
	t := c.clock.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-w.ch:
		return true, nil
	case <-t.C():
		return false, nil
	case <-ctx.Done():
		return false, fmt.Errorf("lease: wait for the release of %q: %w", key, ctx.Err())
	case <-c.stop:
		return false, ErrClosed
	}
}

type waiter struct {
	keys  []string
	token string        // the waiter's queued token, or ""
	ch    chan struct{} // gets a value when one of keys may be free
}

// hub keeps the Client's one Subscription and wakes the waiters of a key
// when its release is announced.
type hub struct {
	c        *Client
	notifier driver.Notifier // nil: the store does not announce releases

	mu          sync.Mutex
	waiters     map[string]map[*waiter]struct{}
	cancel      context.CancelFunc // stops the active subscription; nil if none
	gen         uint64             // counts subscriptions made
	subscribing chan struct{}      // holds a value while Subscribe is in flight
	failedAt    time.Time          // the last Subscribe the store failed
	closed      bool
}

// subscribeCooldown is how long waiters rely on timers alone after a failed
// Subscribe.
const subscribeCooldown = time.Second

func newHub(c *Client) *hub {
	h := &hub{c: c, waiters: make(map[string]map[*waiter]struct{}), subscribing: make(chan struct{}, 1)}
	h.notifier, _ = c.store.(driver.Notifier)
	return h
}

// register returns a waiter woken when any of keys may be free, unless the
// announcement names another queued token as the next holder.
func (h *hub) register(token string, keys []string) *waiter {
	w := &waiter{keys: keys, token: token, ch: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, key := range keys {
		if h.waiters[key] == nil {
			h.waiters[key] = make(map[*waiter]struct{})
		}
		h.waiters[key][w] = struct{}{}
	}
	return w
}

func (h *hub) unregister(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, key := range w.keys {
		delete(h.waiters[key], w)
		if len(h.waiters[key]) == 0 {
			delete(h.waiters, key)
		}
	}
}

// ensure makes the subscription active if the store announces releases and
// returns its generation; 0 means waiters must rely on timers. Any release
// after ensure returns a non-zero generation reaches the waiters.
func (h *hub) ensure(ctx context.Context) uint64 {
	if g := h.current(); g != 0 || h.notifier == nil {
		return g
	}
	select { // one Subscribe at a time
	case h.subscribing <- struct{}{}:
		defer func() { <-h.subscribing }()
	case <-ctx.Done():
		return 0
	}
	h.mu.Lock()
	if h.closed || h.cancel != nil || !h.failedAt.IsZero() && h.c.clock.Now().Sub(h.failedAt) < subscribeCooldown {
		h.mu.Unlock()
		return h.current()
	}
	h.mu.Unlock()
	sub, err := h.notifier.Subscribe(ctx)
	h.mu.Lock()
	switch {
	case err != nil && ctx.Err() != nil: // the caller gave up, not the store
	case err != nil:
		h.failedAt = h.c.clock.Now()
		h.c.log.Warn("lease: release subscription failed; waiters fall back to the holder's TTL", "err", err)
	case h.closed:
		_ = sub.Close()
	default:
		h.failedAt = time.Time{}
		h.gen++
		rctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		g := h.gen
		h.mu.Unlock()
		h.c.spawn(func() { h.read(rctx, sub) })
		return g
	}
	h.mu.Unlock()
	return 0
}

// current returns the generation of the active subscription, 0 if none.
func (h *hub) current() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cancel == nil {
		return 0
	}
	return h.gen
}

// read delivers the announcements of sub until it ends. On an error it
// drops sub and wakes every waiter: announcements may have been missed.
func (h *hub) read(ctx context.Context, sub driver.Subscription) {
	defer sub.Close()
	for {
		a, err := sub.Next(ctx)
		h.mu.Lock()
		if ctx.Err() != nil { // the hub closed
			h.mu.Unlock()
			return
		}
		if err == nil {
			for w := range h.waiters[a.Key] {
				// A queued waiter other than the announced next would be refused.
				if a.Next == "" || w.token == "" || w.token == a.Next {
					signal(w.ch)
				}
			}
			h.mu.Unlock()
			continue
		}
		h.cancel()
		h.cancel = nil
		for _, ws := range h.waiters {
			for w := range ws {
				signal(w.ch)
			}
		}
		h.mu.Unlock()
		h.c.log.Warn("lease: release subscription broke; waiters look again", "err", err)
		return
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.cancel != nil {
		h.cancel() // read closes the subscription
		h.cancel = nil
	}
}

// waitFor is how long a waiter sleeps when the holder has remaining TTL left
// (0: unknown): until it runs out, plus, when spread, jitter so that racing
// waiters do not all look at once.
func waitFor(remaining time.Duration, p params, spread bool) time.Duration {
	remaining = cmp.Or(max(remaining, 0), p.renew)
	d := remaining + time.Millisecond
	if spread {
		d += jitter(min(remaining/10, 50*time.Millisecond))
	}
	return d
}

// jitter returns a random duration in [0, d).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}
