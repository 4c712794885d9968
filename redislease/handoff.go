// Hand-off: a release gives the key to the first live waiter (release.lua),
// and the waiter's store grants it from the announcement, with no request.

package redislease

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
)

// waiters is what a store knows of its own queued waiters, and of the keys
// handed to them. Entries are keyed by token; each Acquire or Release of
// the token settles its entry, so there are at most as many as the store's
// waiters (plus, for a waiter that ends without either, one entry until the
// store is dropped).
type waiters struct {
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

// noteQueued records that token was queued for key by a request sent at
// sent.
func (w *waiters) noteQueued(key, token string, sent time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queued == nil {
		w.queued = make(map[string]queuedAt)
	}
	w.queued[token] = queuedAt{key: key, sent: sent}
}

// settle forgets token: it was granted the key, or released it, or gave up.
func (w *waiters) settle(token string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.queued, token)
	delete(w.handed, token)
}

// announced records a hand-off read from the release channel: the message
// (see release.lua) is key, NUL, token, NUL, fence. Hand-offs to tokens
// this store did not queue are ignored.
func (w *waiters) announced(key, rest string) (next string) {
	next, fence, handed := strings.Cut(rest, "\x00")
	if !handed {
		return next
	}
	f, err := strconv.ParseUint(fence, 10, 64)
	if err != nil {
		return next
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if q, ok := w.queued[next]; ok && q.key == key {
		if w.handed == nil {
			w.handed = make(map[string]handedNote)
		}
		w.handed[next] = handedNote{key: key, fence: f, sent: q.sent}
	}
	return next
}

// takeHanded grants r from a hand-off announced to r.Token, if there is one
// and the waiter's last request was sent less than half r.TTL ago (the key
// was granted for r.TTL after that, so the grant's Since counts from then).
// With replica acknowledgements the store does not grant without its own
// request: the hand-off must be acknowledged by the replicas.
func (s *Store) takeHanded(r lease.Request) (lease.Grant, bool) {
	if s.ack.n > 0 || !r.Queue {
		return lease.Grant{}, false
	}
	w := &s.waiters
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.handed[r.Token]
	if !ok || h.key != r.Key {
		return lease.Grant{}, false
	}
	since := time.Since(h.sent)
	if since >= r.TTL/2 {
		return lease.Grant{}, false // asks the server, which refreshes the TTL
	}
	delete(w.handed, r.Token)
	delete(w.queued, r.Token)
	return lease.Grant{Fence: h.fence, Since: max(since, time.Nanosecond)}, true
}

// storeID returns a random identifier for a store: its own channel, on which
// releases that hand a key to one of its waiters are published (so that the
// other clients of the namespace do not wake), is the release channel
// followed by ":" and the identifier.
func storeID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("store identifier: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
