// Hand-off: a release gives the key to the first live waiter (release.lua),
// and the waiter's store grants it from the announcement, with no request.

package redislease

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/handoff"
)

// takeHanded grants r from a hand-off announced to r.Token (see
// handoff.Waiters.Take). With replica acknowledgements the store does not
// grant without its own request: the hand-off must be acknowledged by the
// replicas.
func (s *Store) takeHanded(r lease.Request) (lease.Grant, bool) {
	if s.ack.n > 0 {
		return lease.Grant{}, false
	}
	return s.waiters.Take(r)
}

// announced records a hand-off read from the release channel: rest, the
// message after the key and a NUL byte (see release.lua), is the next
// waiter's token, then, when the release handed the key to that waiter, a
// further NUL byte and the fence. It returns the next waiter's token.
func announced(w *handoff.Waiters, key, rest string) (next string) {
	next, fence, handed := strings.Cut(rest, "\x00")
	if !handed {
		return next
	}
	if f, err := strconv.ParseUint(fence, 10, 64); err == nil {
		w.Handed(key, next, f)
	}
	return next
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
