//go:build linux

// The FIFO queue of waiters per key (lease.Queuer), kept in the key's lease
// file beside the lease (internal/fifo holds the queue operations).

package filelease

import (
	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/fifo"
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
	return fifo.Live(r.Queue, now)
}

// withQueue returns r with queue q, recorded under boot.
func (r record) withQueue(q []waiter, boot string) record {
	r.Queue, r.QueueBoot = q, boot
	if len(q) == 0 {
		r.Queue, r.QueueBoot = nil, ""
	}
	return r
}
