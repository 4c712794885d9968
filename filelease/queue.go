//go:build linux

// The FIFO queue of waiters per key (lease.Queuer), kept in the key's lease
// file beside the lease: the helpers that read and change a record's queue.

package filelease

import (
	"github.com/leasekit/lease"
)

var _ lease.Queuer = (*Store)(nil)

// MaxWaiters is the most waiters a key's queue holds, and the default of
// [WithMaxWaiters]: a lease file with that many waiters stays well below the
// size the store reads. A queued Acquire of a new token beyond the cap fails
// with a *[lease.QueueFullError].
const MaxWaiters = lease.DefaultMaxWaiters

// maxTokenLen is the longest token the store accepts (the lease Client's
// tokens have 32 characters); it keeps a full queue far below maxFileSize.
const maxTokenLen = 128

// ErrQueueFull is [lease.ErrQueueFull], kept under its old name: the error of
// a queued Acquire that would add a waiter to a full queue matches it.
// Acquire returns it at once.
var ErrQueueFull = lease.ErrQueueFull

// QueuesWaiters reports true: the store hands a freed key to its waiters in
// arrival order (see [lease.Queuer]).
func (s *Store) QueuesWaiters() bool { return true }

// liveQueue returns r's waiters whose entries have not expired at monotonic
// time now of boot, in arrival order, in a new slice. Under another boot
// every entry has expired.
func (r record) liveQueue(now int64, boot string) []waiter {
	if r.QueueBoot != boot {
		return nil
	}
	var live []waiter
	for _, w := range r.Queue {
		if now < w.Expires {
			live = append(live, w)
		}
	}
	return live
}

// withQueue returns r with queue q, recorded under boot.
func (r record) withQueue(q []waiter, boot string) record {
	r.Queue, r.QueueBoot = q, boot
	if len(q) == 0 {
		r.Queue, r.QueueBoot = nil, ""
	}
	return r
}

// ahead returns how many waiters of q are queued ahead of token: all of them
// if token is not queued.
func ahead(q []waiter, token string) int {
	for i, w := range q {
		if w.Token == token {
			return i
		}
	}
	return len(q)
}

// enqueue returns q with token queued last until expires, or with its entry
// refreshed in place if it is queued already. A new token is refused with a
// *lease.QueueFullError when q (live waiters only) holds max already.
func enqueue(q []waiter, key, token string, expires int64, max int) ([]waiter, error) {
	if i := ahead(q, token); i < len(q) {
		q[i].Expires = expires
		return q, nil
	}
	if len(q) >= max {
		return q, &lease.QueueFullError{Key: key, Max: max}
	}
	return append(q, waiter{Token: token, Expires: expires}), nil
}

// dequeue returns q without token's entry and whether it had one.
func dequeue(q []waiter, token string) ([]waiter, bool) {
	i := ahead(q, token)
	if i == len(q) {
		return q, false
	}
	return append(q[:i:i], q[i+1:]...), true
}
