// Package fifo is the per-key queue of waiters of the in-memory and file
// stores (package driver's FIFO rules), as slices kept under the store's lock.
package fifo

import "github.com/leasekit/lease"

// Waiter is one queued token and when its entry expires, in nanoseconds of
// the store's own clock.
type Waiter struct {
	Token   string
	Expires int64
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

// Enqueue returns q with token queued last until expires, or with its entry
// refreshed in place if it is queued already. A new token is refused with a
// *[lease.QueueFullError] when q, live entries only, holds max already.
func Enqueue(q []Waiter, key, token string, expires int64, max int) ([]Waiter, error) {
	if i := Ahead(q, token); i < len(q) {
		q[i].Expires = expires
		return q, nil
	}
	if len(q) >= max {
		return q, &lease.QueueFullError{Key: key, Max: max}
	}
	return append(q, Waiter{Token: token, Expires: expires}), nil
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
