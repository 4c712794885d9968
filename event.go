package lease

import "time"

// EventKind says what an Event reports.
type EventKind int

// Event kinds: a lease's, in the order it normally sees them, then the
// failed acquisition, which has no lease.
const (
	// EventAcquired: a lease was acquired; Event.Wait is the time Acquire waited.
	EventAcquired EventKind = iota + 1
	// EventRenewed: a heartbeat renewal succeeded; Event.Latency is its round trip.
	EventRenewed
	// EventRenewFailed: a renewal failed transiently and will be retried until
	// the local deadline; Event.Err is the cause.
	EventRenewFailed
	// EventLost: the lease was lost; Event.Reason and Event.Err say why.
	EventLost
	// EventReleased: the lease was released by its holder.
	EventReleased
	// EventAcquireFailed: an acquisition (TryAcquire, Acquire, Do or a
	// semaphore's) failed: the key was held, ctx ended, the Client was
	// closed or the store failed. Event.Err is the error returned and
	// Event.Wait the time spent; Holder is the would-be holder and Fence 0.
	// Input rejected as invalid (ErrInvalid) is a caller's bug, not reported.
	EventAcquireFailed
)

func (k EventKind) String() string {
	switch k {
	case EventAcquired:
		return "acquired"
	case EventRenewed:
		return "renewed"
	case EventRenewFailed:
		return "renew_failed"
	case EventLost:
		return "lost"
	case EventReleased:
		return "released"
	case EventAcquireFailed:
		return "acquire_failed"
	}
	return "unknown"
}

// LossReason says why a lease was lost.
type LossReason string

// Loss reasons.
const (
	// LossDeadline: renewals did not succeed before the local deadline.
	LossDeadline LossReason = "deadline"
	// LossNotHeld: the store no longer held our token (expired or taken over).
	LossNotHeld LossReason = "not_held"
	// LossSession: the store reported that the session under the lease died.
	LossSession LossReason = "session"
)

// Event is one thing that happened to a lease, delivered to an Observer.
type Event struct {
	Kind   EventKind
	Key    string
	Holder string
	Fence  uint64
	// Time is when it happened, by the Client's clock.
	Time time.Time
	// Latency is the renewal round trip (EventRenewed).
	Latency time.Duration
	// Wait is the time spent waiting for the key (EventAcquired,
	// EventAcquireFailed).
	Wait time.Duration
	// Reason is why the lease was lost (EventLost).
	Reason LossReason
	// Err is the cause (EventRenewFailed, EventLost), or the error the
	// acquisition returned (EventAcquireFailed).
	Err error
}

// Observer receives lease events, for metrics and tracing. Observe is called
// synchronously from the Client's goroutines (and, for EventAcquireFailed,
// from the failed call), in order for each lease, and must not block or
// call back into the Client. It is called outside the Client's lock, after
// the state change it reports: a lost lease's Done channel may close (and
// its Err be set) before its EventLost is observed.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }
