// Recorder: a lease.Observer that keeps every event, for tests.

package leasetest

import (
	"sync"
	"time"

	"github.com/leasekit/lease"
)

// Recorder is a lease.Observer that keeps every event it sees, in order, and
// lets a test wait for one. The zero value is ready to use; it is safe for
// concurrent use.
type Recorder struct {
	mu      sync.Mutex
	events  []lease.Event
	changed chan struct{} // closed and replaced on every event
}

// Observe records ev.
func (r *Recorder) Observe(ev lease.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []lease.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]lease.Event(nil), r.events...)
}

// Len returns how many events were recorded so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// Find returns the first event at index from or later that match accepts,
// and its index, waiting up to d for it to be recorded.
func (r *Recorder) Find(from int, d time.Duration, match func(lease.Event) bool) (lease.Event, int, bool) {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		for i := max(from, 0); i < len(r.events); i++ {
			if match(r.events[i]) {
				ev := r.events[i]
				r.mu.Unlock()
				return ev, i, true
			}
		}
		from = len(r.events)
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-timeout.C:
			return lease.Event{}, -1, false
		}
	}
}

// Count returns how many events at index from or later match accepts.
func (r *Recorder) Count(from int, match func(lease.Event) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i := max(from, 0); i < len(r.events); i++ {
		if match(r.events[i]) {
			n++
		}
	}
	return n
}

// Kind matches events of kind k (for any key when key is "").
func Kind(key string, k lease.EventKind) func(lease.Event) bool {
	return func(ev lease.Event) bool { return ev.Kind == k && (key == "" || ev.Key == key) }
}
