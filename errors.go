package lease

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Compare with errors.Is: the errors returned carry more
// detail (the key, the holder, the cause) and wrap these.
var (
	// ErrHeld: the key is held by another holder, or by another lease of the
	// same Client (HeldError.Self). The error is a *HeldError.
	ErrHeld = errors.New("lease: held by another holder")
	// ErrLost: the lease was lost while held (renewals failed until the local
	// deadline, the store no longer had our token, or the store's session died).
	ErrLost = errors.New("lease: lost")
	// ErrReleased: the lease was released (by Release or Client.Close).
	ErrReleased = errors.New("lease: released")
	// ErrNotHeld: the store does not hold the key for this token (it expired,
	// was taken over, or was never held).
	ErrNotHeld = errors.New("lease: not held by this token")
	// ErrInvalid: invalid input (key, option, TTL). The error is an *InvalidError.
	ErrInvalid = errors.New("lease: invalid input")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("lease: client closed")
	// ErrQueueFull: the key's queue of waiters (see Queuer) already holds as
	// many live waiters as the store allows, so a new waiter was not queued.
	// Acquire returns it at once, without waiting: it is not transient in
	// the sense of a network error, and waiting outside the queue would
	// bypass the limit. The error is a *QueueFullError.
	ErrQueueFull = errors.New("lease: queue of waiters full")
)

// QueueFullError is returned when a waiter cannot join a key's queue because
// the store's limit of waiters per key is reached. It matches ErrQueueFull.
type QueueFullError struct {
	// Key is the lease name.
	Key string
	// Max is the store's limit of live waiters per key (0 when the store
	// cannot tell).
	Max int
}

func (e *QueueFullError) Error() string {
	if e.Max > 0 {
		return fmt.Sprintf("lease: key %q: queue of waiters full (at most %d); try again later", e.Key, e.Max)
	}
	return fmt.Sprintf("lease: key %q: queue of waiters full; try again later", e.Key)
}

// Is reports whether target is ErrQueueFull.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// HeldError is returned when a key is held, by someone else or by the Client
// that asked. It matches ErrHeld.
type HeldError struct {
	// Key is the lease name.
	Key string
	// Holder is the current holder's identity, "" when the store cannot tell.
	Holder string
	// Fence is the current holder's fence, 0 when the store cannot tell.
	Fence uint64
	// Remaining is the holder's remaining TTL as the store sees it, 0 when the
	// store cannot tell.
	Remaining time.Duration
	// Queued is how many waiters were queued ahead (stores that queue
	// waiters, see Queuer); a free key with waiters queued is reserved for
	// them.
	Queued int
	// Self reports that the holder is the very Client that was asked: one of
	// its own leases holds the key. Leases are not reentrant, so Acquire
	// returns this at once instead of waiting for itself. Holder, Fence and
	// Remaining are then those of the Client's lease. When two goroutines of
	// a Client race for a free key, the loser's TryAcquire may get the
	// store's refusal without Self: the winner's grant was not in yet.
	Self bool
	// Err is set when Acquire (or AcquireSemaphore) gave up waiting because
	// its ctx ended: it is ctx's error, which the HeldError then also
	// matches, and the other fields describe the last refusal the store
	// gave. An Acquire that ends before any refusal returns ctx's error
	// without a HeldError: it cannot tell that the key was held.
	Err error
	// Waited is how long Acquire waited before it gave up (with Err).
	Waited time.Duration
}

func (e *HeldError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("lease: acquire %q: gave up after %v: %s: %v",
			e.Key, e.Waited.Round(time.Millisecond), e.describe(false), e.Err)
	}
	return "lease: " + e.describe(true)
}

// describe says who holds the key; remaining leaves out the holder's
// remaining TTL, stale in a later report.
func (e *HeldError) describe(remaining bool) string {
	if e.Holder == "" && e.Fence == 0 && e.Queued > 0 {
		return fmt.Sprintf("key %q is reserved for %d queued waiter(s)", e.Key, e.Queued)
	}
	s := fmt.Sprintf("key %q is held", e.Key)
	if e.Self {
		s = fmt.Sprintf("key %q is already held by this client", e.Key)
		if e.Holder != "" {
			s += fmt.Sprintf(" as %q", e.Holder)
		}
	} else if e.Holder != "" {
		s += fmt.Sprintf(" by %q", e.Holder)
	}
	if e.Fence != 0 {
		s += fmt.Sprintf(" (fence %d)", e.Fence)
	}
	if remaining && e.Remaining > 0 {
		s += fmt.Sprintf(", %v left", e.Remaining.Round(time.Millisecond))
	}
	if e.Queued > 0 {
		s += fmt.Sprintf(", %d waiter(s) queued", e.Queued)
	}
	return s
}

// Is reports whether target is ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Unwrap returns Err: an Acquire that gave up also matches ctx's error
// (context.DeadlineExceeded or context.Canceled).
func (e *HeldError) Unwrap() error { return e.Err }

// InvalidError describes invalid input. It matches ErrInvalid.
type InvalidError struct {
	// Field names what was wrong: "key", "ttl", "renew interval", "store", ...
	Field string
	// Reason says why.
	Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("lease: invalid %s: %s", e.Field, e.Reason)
}

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Invalid returns an *InvalidError; stores use it for input they cannot accept.
func Invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
