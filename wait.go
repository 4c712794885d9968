package lease

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leasekit/lease/driver"
)

// Waiting: Acquire registers a waiter with the Client's hub, which keeps one
// Subscription (when the store is a Notifier) shared by all waiters of the
// Client, and wakes the waiters of a key when the store announces its release.
// Without announcements (or while the subscription is broken) waiters sleep
// until the holder's TTL would run out.

type waiter struct {
	keys  []string
	token string        // the waiter's place in the store's queue; "" if it does not queue
	ch    chan struct{} // gets a value when one of keys may be free
}

func (w *waiter) notify() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

type hub struct {
	c        *Client
	notifier driver.Notifier // nil: the store cannot announce releases

	mu       sync.Mutex
	waiters  map[string]map[*waiter]struct{}
	sub      driver.Subscription // the active subscription, nil if none
	cancel   context.CancelFunc  // stops the active subscription's reader
	gen      uint64              // counts subscriptions made
	starting chan struct{}       // non-nil while Subscribe is in flight
	failedAt time.Time           // the last Subscribe the store failed (not one its caller gave up)
	closed   bool
}

// subscribeCooldown is how long waiters sleep on timers alone after a failed
// Subscribe before anyone tries to subscribe again.
const subscribeCooldown = time.Second

func newHub(c *Client) *hub {
	h := &hub{c: c, waiters: make(map[string]map[*waiter]struct{})}
	h.notifier, _ = c.store.(driver.Notifier)
	return h
}

// register returns a waiter woken when any of keys may be free (a semaphore
// waits for any of its slots). token is the waiter's queued token ("" if it
// does not queue): announcements naming another queued token as the next
// holder do not wake it.
func (h *hub) register(token string, keys ...string) *waiter {
	w := &waiter{keys: keys, token: token, ch: make(chan struct{}, 1)}
	if h.notifier == nil {
		return w
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, key := range keys {
		ws := h.waiters[key]
		if ws == nil {
			ws = make(map[*waiter]struct{})
			h.waiters[key] = ws
		}
		ws[w] = struct{}{}
	}
	return w
}

func (h *hub) unregister(w *waiter) {
	if h.notifier == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, key := range w.keys {
		if ws := h.waiters[key]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(h.waiters, key)
			}
		}
	}
}

// ensure makes the subscription active if the store can announce releases
// and returns its generation; 0 means waiters must rely on timers. Any
// release after ensure returns a non-zero generation reaches the waiters.
func (h *hub) ensure(ctx context.Context) uint64 {
	if h.notifier == nil {
		return 0
	}
	for {
		h.mu.Lock()
		switch {
		case h.closed:
			h.mu.Unlock()
			return 0
		case h.sub != nil:
			g := h.gen
			h.mu.Unlock()
			return g
		case h.starting != nil:
			st := h.starting
			h.mu.Unlock()
			select {
			case <-st:
				continue
			case <-ctx.Done():
				return 0
			}
		case !h.failedAt.IsZero() && h.c.clock.Now().Sub(h.failedAt) < subscribeCooldown:
			h.mu.Unlock()
			return 0
		}
		st := make(chan struct{})
		h.starting = st
		h.mu.Unlock()

		sub, err := h.notifier.Subscribe(ctx)

		h.mu.Lock()
		h.starting = nil
		close(st)
		if err != nil {
			if ctx.Err() != nil {
				// The caller gave up, the store did not fail: the next
				// waiter subscribes at once.
				h.mu.Unlock()
				return 0
			}
			h.failedAt = h.c.clock.Now()
			h.mu.Unlock()
			h.c.log.Warn("lease: release subscription failed; waiters fall back to the holder's TTL", "err", err)
			return 0
		}
		if h.closed {
			h.mu.Unlock()
			_ = sub.Close()
			return 0
		}
		h.failedAt = time.Time{}
		h.gen++
		g := h.gen
		rctx, cancel := context.WithCancel(context.Background())
		h.sub, h.cancel = sub, cancel
		h.mu.Unlock()
		h.c.spawn(func() { h.read(rctx, sub, g) })
		return g
	}
}

// active reports whether a subscription is active.
func (h *hub) active() bool {
	if h.notifier == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sub != nil
}

// changed reports whether the subscription is not the one of generation gen.
func (h *hub) changed(gen uint64) bool {
	if h.notifier == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sub != nil && h.gen != gen
}

// read delivers the announcements of subscription gen until it ends. On an error it drops the
// subscription and wakes every waiter, which look again and subscribe anew:
// announcements may have been missed.
func (h *hub) read(ctx context.Context, sub driver.Subscription, gen uint64) {
	for {
		a, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return // hub closed
			}
			h.mu.Lock()
			mine := h.gen == gen && h.sub == sub
			if mine {
				h.sub = nil
				h.cancel()
			}
			for _, ws := range h.waiters {
				for w := range ws {
					w.notify() // a waiter of several keys is notified once per key: harmless
				}
			}
			h.mu.Unlock()
			if mine {
				_ = sub.Close()
			}
			h.c.log.Warn("lease: release subscription broke; waiters look again", "err", err)
			return
		}
		h.deliver(a)
	}
}

// deliver wakes the waiters of a's key that may take it.
func (h *hub) deliver(a driver.Announcement) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.waiters[a.Key] {
		// A queued waiter other than the announced head would be refused.
		if a.Next == "" || w.token == "" || w.token == a.Next {
			w.notify()
		}
	}
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	sub, cancel := h.sub, h.cancel
	h.sub, h.cancel = nil, nil
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if sub != nil {
		_ = sub.Close()
	}
}

// waitFor is how long a waiter sleeps when the holder has remaining TTL left
// (0: unknown): until it would run out, plus, when spread, jitter so that
// waiters racing for the key do not all look at once. The head of a FIFO
// queue is not spread: only it can take the key when the holder's TTL runs
// out (the others would be refused), so it looks as soon as it can.
func waitFor(remaining time.Duration, p params, spread bool) time.Duration {
	if remaining <= 0 {
		remaining = p.renew
	}
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
