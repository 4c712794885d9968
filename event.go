package lease

import (
	"context"
	"time"
)

// EventKind says what an Event reports.
type EventKind int

// Event kinds.
const (
	EventAcquired      EventKind = iota + 1 // Wait is the time spent acquiring, until the grant came back at Time
	EventRenewed                            // Latency is the renewal's round trip
	EventRenewFailed                        // retried until the local deadline; Err is the cause
	EventLost                               // Reason and Err say why
	EventReleased                           // released by its holder; Latency is how long Release took, Err the store's error
	EventAcquireFailed                      // Err is the error returned (not for invalid input), Wait the time spent
	EventBroken                             // this Client broke Key (ForceRelease): Holder and Fence are the evicted hold's
)

var kindNames = [...]string{"unknown", "acquired", "renewed", "renew_failed", "lost", "released", "acquire_failed", "broken"}

func (k EventKind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "unknown"
	}
	return kindNames[k]
}

// LossReason says why a lease was lost.
type LossReason string

// Loss reasons.
const (
	LossDeadline LossReason = "deadline" // no successful renewal before the local deadline
	LossNotHeld  LossReason = "not_held" // the store no longer held the token
	LossSession  LossReason = "session"  // the store's session under the lease died
	LossMaxHold  LossReason = "max_hold" // held for WithMaxHold's duration: given up
	LossBroken   LossReason = "broken"   // an operator broke the lease (ForceRelease)
)

// Event is one thing that happened to a lease (or a failed acquisition),
// at Time by the Client's clock. See EventKind for the fields each kind sets.
type Event struct {
	Kind    EventKind
	Key     string
	Holder  string
	Fence   uint64
	Time    time.Time
	Latency time.Duration
	Wait    time.Duration
	Reason  LossReason
	Err     error
	// Shared says the lease is a reader's (Client.AcquireShared).
	Shared bool
	// Semaphore is the semaphore's key for the lease of one of its slots
	// (Key is then SlotKey(Semaphore, i)) or a failed AcquireSemaphore.
	Semaphore string
	// ID tells the Client's leases apart (from 1, never reused); 0 for
	// EventAcquireFailed and EventBroken.
	ID uint64
	// Context is the caller's ctx, for the events of a call: acquired,
	// acquire_failed and released (a tracer's parent span); nil otherwise.
	Context context.Context
}

// Observer receives lease events, for metrics and tracing. Observe is called
// synchronously, in order for each lease, after the state change it reports;
// it must not block or call back into the Client.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }
