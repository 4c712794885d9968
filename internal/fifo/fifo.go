// Package fifo is the per-key queue of waiters of the in-memory and file
// stores (package driver's FIFO rules), as slices kept under the store's lock.
package fifo

import "github.com/leasekit/lease"

// Waiter is one queued token, when its entry expires, in nanoseconds of
// the store's own clock, and whether it waits for a shared hold.
type Waiter struct {
	Token   string
	Expires int64
	Shared  bool
}

// Live returns q's entries not expired at now, in a new slice (or nil).
func Live(q []Waiter, now int64) []Waiter {
	var live []Waiter
	for _, w := range q {
		if now < w.Expires {
			live = append(live, w)
		}
	}
	return live
}

// Ahead returns how many entries of q are ahead of token: all of them if
// token is not queued.
func Ahead(q []Waiter, token string) int {
	for i, w := range q {
		if w.Token == token {
			return i
		}
	}
	return len(q)
}

// WritersAhead returns how many exclusive entries of q are ahead of token:
// all of them if token is not queued. A shared request waits only for them.
func WritersAhead(q []Waiter, token string) int {
	n := 0
	for _, w := range q[:Ahead(q, token)] {
		if !w.Shared {
			n++
		}
	}
	return n
}

// Next is the token an announcement names (driver.Announcement.Next): the
// head of q if it waits for an exclusive hold, else "" (readers all look).
func Next(q []Waiter) string {
	if len(q) == 0 || q[0].Shared {
		return ""
	}
	return q[0].Token
}

// Enqueue returns q with w queued last, or with w.Token's entry refreshed in
// place (its expiry and kind) if it is queued already. A new token is
// refused with a *[lease.QueueFullError] when q, live entries only, holds
// max already.
func Enqueue(q []Waiter, key string, w Waiter, max int) ([]Waiter, error) {
	if i := Ahead(q, w.Token); i < len(q) {
		q[i] = w
		return q, nil
	}
	if len(q) >= max {
		return q, &lease.QueueFullError{Key: key, Max: max}
	}
	return append(q, w), nil
}

// Dequeue returns q without token's entry, in a new slice, and whether it
// had one.
func Dequeue(q []Waiter, token string) ([]Waiter, bool) {
	i := Ahead(q, token)
	if i == len(q) {
		return q, false
	}
	return append(q[:i:i], q[i+1:]...), true
}
