// The FIFO queue of waiters per key (lease.Queuer); internal/fifo holds the
// queue operations, shared with filelease.

package memlease

import (
	"fmt"
	"time"

	"github.com/leasekit/lease/internal/fifo"
)

// nanos is t in nanoseconds since the store's epoch (monotonic when the
// clock's times carry a monotonic reading).
func (st *state) nanos(t time.Time) int64 { return int64(t.Sub(st.epoch)) }

// liveQueueLocked drops the expired waiters of key and returns the rest, in
// arrival order; st.mu is held.
func (st *state) liveQueueLocked(key string, now time.Time) []fifo.Waiter {
	st.setQueueLocked(key, fifo.Live(st.queues[key], st.nanos(now)))
	return st.queues[key]
}

// enqueueLocked queues token behind the others, or refreshes its entry in
// place; a new token beyond st.maxWaiters live waiters is refused with a
// *lease.QueueFullError. The queue holds only live waiters (Acquire called
// liveQueueLocked); st.mu is held.
func (st *state) enqueueLocked(key, token string, expires time.Time) error {
	q, err := fifo.Enqueue(st.queues[key], key, token, st.nanos(expires), st.maxWaiters)
	if err != nil {
		return fmt.Errorf("memlease: acquire %q: %w", key, err)
	}
	st.setQueueLocked(key, q)
	return nil
}

// dequeueLocked removes token from key's queue and reports whether it was
// queued; st.mu is held.
func (st *state) dequeueLocked(key, token string) bool {
	q, ok := fifo.Dequeue(st.queues[key], token)
	st.setQueueLocked(key, q)
	return ok
}

// setQueueLocked stores key's queue, forgetting an empty one; st.mu is held.
func (st *state) setQueueLocked(key string, q []fifo.Waiter) {
	if len(q) == 0 {
		delete(st.queues, key)
		return
	}
	st.queues[key] = q
}
