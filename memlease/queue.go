// The FIFO queue of waiters per key (lease.Queuer).

package memlease

import (
	"fmt"
	"time"

	"github.com/leasekit/lease"
)

var _ lease.Queuer = (*Store)(nil)

// waiter is one queued token and when its entry expires.
type waiter struct {
	token   string
	expires time.Time
}

// QueuesWaiters reports true: a Store hands freed keys to waiters in arrival
// order (see lease.Queuer).
func (s *Store) QueuesWaiters() bool { return true }

// liveQueueLocked drops the expired waiters of key and returns the rest, in
// arrival order; st.mu is held.
func (st *state) liveQueueLocked(key string, now time.Time) []waiter {
	q := st.queues[key]
	live := q[:0]
	for _, w := range q {
		if now.Before(w.expires) {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		delete(st.queues, key)
		return nil
	}
	st.queues[key] = live
	return live
}

// aheadLocked returns how many live waiters are queued ahead of token (all of
// them if token is not queued); st.mu is held.
func aheadLocked(q []waiter, token string) int {
	for i, w := range q {
		if w.token == token {
			return i
		}
	}
	return len(q)
}

// enqueueLocked queues token behind the others, or refreshes its entry in
// place; a new token beyond st.maxWaiters live waiters is refused with a
// *lease.QueueFullError. The queue holds only live waiters (Acquire called
// liveQueueLocked); st.mu is held.
func (st *state) enqueueLocked(key, token string, expires time.Time) error {
	q := st.queues[key]
	for i := range q {
		if q[i].token == token {
			q[i].expires = expires
			return nil
		}
	}
	if err := lease.CheckMaxWaiters(st.maxWaiters); err != nil {
		return fmt.Errorf("memlease: acquire %q: %w", key, err)
	}
	if len(q) >= st.maxWaiters {
		return fmt.Errorf("memlease: acquire %q: %w", key, &lease.QueueFullError{Key: key, Max: st.maxWaiters})
	}
	st.queues[key] = append(q, waiter{token: token, expires: expires})
	return nil
}

// dequeueLocked removes token from key's queue and reports whether it was
// queued; st.mu is held.
func (st *state) dequeueLocked(key, token string) bool {
	q := st.queues[key]
	for i, w := range q {
		if w.token == token {
			st.queues[key] = append(q[:i:i], q[i+1:]...)
			if len(st.queues[key]) == 0 {
				delete(st.queues, key)
			}
			return true
		}
	}
	return false
}
