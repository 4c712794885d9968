// Package handoff keeps what a store knows of its own queued waiters and of
// the keys a release handed to them on the server, so that the store can
// grant a waiter's Acquire from the announcement alone, with no request.
// Stores that hand a freed key to the first waiter in the release itself
// (redislease, pglease's table mode) share it.
package handoff

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
)

// Waiters is what a store knows of its own queued waiters, and of the keys
// handed to them. Entries are keyed by token; each Acquire or Release of the
// token settles its entry, so there are at most as many as the store's
// waiters (plus, for a waiter that ends without either, one entry until the
// store is dropped). The zero value is ready to use; it is safe for
// concurrent use.
type Waiters struct {
	// FromFirst makes a hand-off's Since count from the first queueing
	// request of the token's wait rather than from its last: for stores
	// whose hand-off is not atomic with a waiter's requests, so that a
	// refused request may be sent after the release computed the handed
	// lease's expiry (PostgreSQL, where a statement's snapshot predates the
	// commit of a release running beside it). Every entry of the token in
	// the queue was written by a request of its wait, so the hand-off, which
	// read one, came after the first. Set it before the first use.
	FromFirst bool

	listening atomic.Int32 // open subscriptions: queued entries welcome a hand-off

	mu     sync.Mutex
	queued map[string]queuedAt   // token -> its last queueing request
	handed map[string]handedNote // token -> the hand-off announced to it
}

// queuedAt is a waiter's last refused Acquire with Queue: the lease key and
// the time the request was sent (its entry, with its TTL, was written after
// that).
type queuedAt struct {
	key  string
	sent time.Time
}

// handedNote is a hand-off announced to a waiter of this store: the key was
// granted with fence, on the server, after the waiter's request sent at sent.
type handedNote struct {
	key   string
	fence uint64
	sent  time.Time
}

// Listen records that a subscription of the store opened: from now on its
// waiters hear of hand-offs, so their queue entries may ask for them.
func (w *Waiters) Listen() { w.listening.Add(1) }

// Unlisten records that a subscription of the store closed.
func (w *Waiters) Unlisten() { w.listening.Add(-1) }

// Listening reports whether a subscription of the store is open.
func (w *Waiters) Listening() bool { return w.listening.Load() > 0 }

// Refused records the outcome of an Acquire of r, sent at sent, that the
// server refused: with r.Queue, r.Token is now queued for r.Key (with
// FromFirst, a later request of the same wait keeps the first's time).
func (w *Waiters) Refused(r lease.Request, sent time.Time) {
	if !r.Queue {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queued == nil {
		w.queued = make(map[string]queuedAt)
	}
	if q, ok := w.queued[r.Token]; ok && w.FromFirst && q.key == r.Key {
		return
	}
	w.queued[r.Token] = queuedAt{key: r.Key, sent: sent}
}

// Granted records that the server granted an Acquire of r: with r.Queue,
// r.Token has left the queue.
func (w *Waiters) Granted(r lease.Request) {
	if r.Queue {
		w.Settle(r.Token)
	}
}

// Settle forgets token: it was granted the key, or released it, or gave up.
func (w *Waiters) Settle(token string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.queued, token)
	delete(w.handed, token)
}

// Handed records a hand-off read from an announcement: key was granted to
// token with fence. Hand-offs to tokens this store did not queue for key
// are ignored.
func (w *Waiters) Handed(key, token string, fence uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q, ok := w.queued[token]; ok && q.key == key {
		if w.handed == nil {
			w.handed = make(map[string]handedNote)
		}
		w.handed[token] = handedNote{key: key, fence: fence, sent: q.sent}
	}
}

// Take grants r from a hand-off announced to r.Token, if there is one and
// the waiter's last (with FromFirst, first) request was sent less than half
// r.TTL ago (the key was granted for r.TTL after that, so the grant's Since
// counts from then). Only a queueing request (r.Queue) is granted so: the
// hand-off was to a queued waiter. Otherwise the store asks the server,
// which refreshes the TTL.
func (w *Waiters) Take(r lease.Request) (lease.Grant, bool) {
	if !r.Queue {
		return lease.Grant{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.handed[r.Token]
	if !ok || h.key != r.Key {
		return lease.Grant{}, false
	}
	since := time.Since(h.sent)
	if since >= r.TTL/2 {
		return lease.Grant{}, false
	}
	delete(w.handed, r.Token)
	delete(w.queued, r.Token)
	return lease.Grant{Fence: h.fence, Since: max(since, time.Nanosecond)}, true
}
