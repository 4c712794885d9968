// Package fifo is the queue of waiters that the in-memory and file stores
// keep per key beside the lease (the FIFO rules of package driver): tokens in
// arrival order, each entry live until its expiry, refreshed in place, and
// capped. The functions work on slices; the store keeps them under its lock.
package fifo

import "github.com/leasekit/lease"

// Waiter is one queued token and when its entry expires, in nanoseconds of
// the store's own clock.
type Waiter struct {
	Token   string
	Expires int64
}

// Live returns q's entries that have not expired at now, in arrival order,
// in a new slice (nil if none is left).
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
