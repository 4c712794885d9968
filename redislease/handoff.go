// Hand-off: a release gives the key to the first live waiter whose store
// listens (release.lua), and announces it on that store's own channel. The
// announcement only wakes the waiter, whose Acquire then finds the key held
// by its own token (acquire.lua): the grant and its fence come from the
// server, never from the message (docs/design.md, "FIFO hand-off").

package redislease

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// announced returns the next waiter's token from rest, the message after the
// key and a NUL byte (see release.lua). Anything after a further NUL byte
// (the fence that earlier versions published with a hand-off) is ignored:
// anyone allowed to PUBLISH could write it.
func announced(rest string) (next string) {
	next, _, _ = strings.Cut(rest, "\x00")
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
