package lease

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, to compare with errors.Is; the errors returned wrap them
// with detail.
var (
	// ErrHeld: the key is held, by another holder or by this Client. The
	// error is a *HeldError.
	ErrHeld = errors.New("lease: held by another holder")
	// ErrLost: the lease was lost while held. The error is a *LostError.
	ErrLost = errors.New("lease: lost")
	// ErrReleased: the lease was released (by Release or Client.Close).
	ErrReleased = errors.New("lease: released")
	// ErrNotHeld: the store does not hold the key for this token.
	ErrNotHeld = errors.New("lease: not held by this token")
	// ErrInvalid: invalid input. The error is an *InvalidError.
	ErrInvalid = errors.New("lease: invalid input")
	// ErrCorrupt: the store answered with data under a lease's keys that it
	// cannot have written (a value of another type or format, a row with
	// NULLs or out-of-range numbers, foreign content): a store's operation
	// refuses it, never grants the key over it and never panics. It heals
	// only when an operator deletes the data, so Acquire returns it at once.
	ErrCorrupt = errors.New("lease: corrupt data in the store")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("lease: client closed")
	// ErrQueueFull: the key's queue of waiters is full; Acquire returns it
	// at once. The error is a *QueueFullError.
	ErrQueueFull = errors.New("lease: queue of waiters full")
	// ErrBroken: an operator broke the lease (Client.ForceRelease); the store
	// no longer holds the key for this token. It matches ErrNotHeld too.
	ErrBroken error = &childError{"lease: broken by an operator", ErrNotHeld}
	// ErrStaleFence: a fenced resource refused a write because it has
	// accepted a larger fence, so a newer holder has written. It matches
	// ErrNotHeld too. The error is a *StaleFenceError.
	ErrStaleFence error = &childError{"lease: stale fence", ErrNotHeld}
)

// childError is a sentinel that also matches its parent.
type childError struct {
	msg    string
	parent error
}

func (e *childError) Error() string { return e.msg }

// Unwrap returns the parent sentinel.
func (e *childError) Unwrap() error { return e.parent }

// QueueFullError says that a waiter could not join the queue of Key, which
// holds Max live waiters (0: unknown). It matches ErrQueueFull.
type QueueFullError struct {
	Key string
	Max int
}

func (e *QueueFullError) Error() string {
	if e.Max > 0 {
		return fmt.Sprintf("lease: key %q: queue of waiters full (at most %d); try again later", e.Key, e.Max)
	}
	return fmt.Sprintf("lease: key %q: queue of waiters full; try again later", e.Key)
}

// Is matches ErrQueueFull.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// HeldError says that a key is held. It matches ErrHeld. Holder, Fence and
// Remaining (the holder's TTL left) are zero when the store cannot tell.
type HeldError struct {
	Key       string
	Holder    string
	Fence     uint64
	Remaining time.Duration
	// Queued counts the waiters queued ahead; a free key is theirs.
	Queued int
	// Self: one of this Client's own leases holds the key (leases are not
	// reentrant); the other fields are then that lease's.
	Self bool
	// Err is ctx's error when an acquisition gave up waiting after Waited;
	// the HeldError then matches it too and describes the last refusal.
	Err    error
	Waited time.Duration
}

func (e *HeldError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("lease: acquire %q: gave up after %v: %s: %v",
			e.Key, e.Waited.Round(time.Millisecond), e.describe(false), e.Err)
	}
	return "lease: " + e.describe(true)
}

// describe says who holds the key, with the remaining TTL if asked.
func (e *HeldError) describe(remaining bool) string {
	if e.Holder == "" && e.Fence == 0 && e.Queued > 0 {
		return fmt.Sprintf("key %q is reserved for %d queued waiter(s)", e.Key, e.Queued)
	}
	s, by := fmt.Sprintf("key %q is held", e.Key), " by %q"
	if e.Self {
		s, by = fmt.Sprintf("key %q is already held by this client", e.Key), " as %q"
	}
	if e.Holder != "" {
		s += fmt.Sprintf(by, e.Holder)
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

// Is matches ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Unwrap returns Err.
func (e *HeldError) Unwrap() error { return e.Err }

// InvalidError says which input was wrong. It matches ErrInvalid.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("lease: invalid %s: %s", e.Field, e.Reason) }

// Is matches ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Invalid returns an *InvalidError.
func Invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// LostError says why a lease was lost. It matches ErrLost; Err is the cause.
type LostError struct {
	Key    string
	Reason LossReason
	Err    error
}

func (e *LostError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("lease: %q lost (%s)", e.Key, e.Reason)
	}
	return fmt.Sprintf("lease: %q lost (%s): %v", e.Key, e.Reason, e.Err)
}

// Is matches ErrLost.
func (e *LostError) Is(target error) bool { return target == ErrLost }

// Unwrap returns Err.
func (e *LostError) Unwrap() error { return e.Err }

// StaleFenceError says that Resource refused a write with Fence because it
// has accepted Stored, a larger one. It matches ErrStaleFence and ErrNotHeld.
type StaleFenceError struct {
	Resource string
	Fence    uint64
	Stored   uint64
}

func (e *StaleFenceError) Error() string {
	return fmt.Sprintf("lease: %s refused fence %d: it has accepted %d; a newer holder has written",
		e.Resource, e.Fence, e.Stored)
}

// Is matches ErrStaleFence and ErrNotHeld.
func (e *StaleFenceError) Is(target error) bool {
	return target == ErrStaleFence || target == ErrNotHeld
}
