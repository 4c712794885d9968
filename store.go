package lease

import (
	"context"
	"time"
)

// Request names one lease operation for a [Store]. The Client fills it in;
// stores read only the fields their operation needs.
type Request struct {
	// Key is the lease name, already validated by the Client.
	Key string
	// Token is the holder's unique token (32 hex characters, 128 random bits).
	Token string
	// Holder is a human-readable identity stored beside the token (e.g. host:pid).
	Holder string
	// TTL is how long the store keeps the lease without a renewal.
	TTL time.Duration
	// Queue asks a [Queuer] store to keep Token's place in Key's FIFO queue of
	// waiters: when Acquire cannot grant the key (it is held, or free but
	// reserved for waiters queued ahead), it queues Token, or refreshes its
	// entry for another TTL, and returns a *HeldError. The Client sets it only
	// for stores whose QueuesWaiters reports true.
	Queue bool
	// RecordLater tells the store that the caller honours [Grant.Since] and
	// [Grant.Unrecorded], so the store may grant a queued token's turn on
	// the write that last refreshed its entry, without another write on the
	// acquisition's path. The Client sets it with Queue. Stores may ignore
	// it.
	RecordLater bool
}

// CheckHolder returns an *[InvalidError] when holder is longer than
// [MaxHolderLen] bytes. Every store's Acquire calls it, so that no client,
// whatever it sends, can store a holder that other clients then have to read
// back.
func CheckHolder(holder string) error {
	if len(holder) > MaxHolderLen {
		return Invalid("holder", "%d bytes, longer than %d", len(holder), MaxHolderLen)
	}
	return nil
}

// Grant is what a store returns for a successful acquisition.
type Grant struct {
	// Fence is the fencing token: strictly larger than every fence the store
	// has granted for the same key before, across all clients.
	Fence uint64
	// Lost, when non-nil, is closed by the store when the lease can no longer
	// be held, independently of renewals: a session-bound store (an etcd lease,
	// a ZooKeeper session) closes it when the session dies. The Client then
	// reports the lease lost at once.
	Lost <-chan struct{}
	// Since, when positive, says the lease's TTL started that long before
	// the Acquire call: the store granted the key on an earlier write of its
	// own (a queued waiter's entry, written then, that becomes the lease
	// without another write on the acquisition's path; a shared etcd lease
	// refreshed then, that the key is attached to). It must be less than
	// half the TTL. The Client counts the local deadline and the renewals
	// from then.
	Since time.Duration
	// Unrecorded asks the Client to renew at once, off the acquisition's
	// path: the store granted a request with RecordLater without writing
	// the grant down (Inspect may read the key as reserved until then).
	Unrecorded bool
}

// Info describes the current holder of a key, as [Store.Inspect] reports it.
type Info struct {
	// Key is the lease name.
	Key string
	// Held is false when nobody holds the key; the other fields are then zero
	// except Fence, which a store may set to the last fence it granted.
	Held bool
	// Holder is the holder's human-readable identity, if the store keeps it.
	Holder string
	// Fence is the current holder's fencing token.
	Fence uint64
	// Remaining is the store's view of the time left before the lease
	// expires; 0 when the store cannot tell.
	Remaining time.Duration
}

// Store is the adapter between the Client and one backend. Each method is one
// atomic operation (ideally one round trip); a store runs no goroutines,
// sleeps or retries of its own: the Client owns all timing.
//
// Error contract:
//   - Acquire on a key held by another token returns an error that matches
//     [ErrHeld]; return a *[HeldError] so callers learn who holds it.
//   - Renew and Release with a token that no longer holds the key (expired,
//     taken over, never held) return an error that matches [ErrNotHeld].
//   - Input the backend cannot accept returns an error matching [ErrInvalid].
//   - A queued Acquire that would add a waiter to a full queue returns an
//     error matching [ErrQueueFull] (see [Queuer]).
//   - Any other error is treated as transient (the Client may retry).
//
// Acquire with the token that already holds the key succeeds again with the
// same fence and refreshes the TTL, so a retried acquire is idempotent.
type Store interface {
	// Acquire takes r.Key for r.Token for r.TTL if the key is free or expired.
	Acquire(ctx context.Context, r Request) (Grant, error)
	// Renew extends the lease to r.TTL from now if r.Token still holds r.Key.
	Renew(ctx context.Context, r Request) error
	// Release frees r.Key if r.Token still holds it.
	Release(ctx context.Context, r Request) error
	// Inspect reports who holds key. A free key is not an error.
	Inspect(ctx context.Context, key string) (Info, error)
	// Close releases the store's own resources (not the backend client it was
	// given, unless its documentation says so).
	Close() error
}

// BatchRenewer is implemented by stores that can renew many leases in one
// round trip. RenewMany returns one error per request, in order, with the same
// meaning as [Store.Renew]'s; if the whole call failed, every element holds
// that error.
type BatchRenewer interface {
	RenewMany(ctx context.Context, rs []Request) []error
}

// Notifier is implemented by stores that can announce releases, so waiters
// wake as soon as a key is freed instead of sleeping until the holder's TTL
// runs out.
type Notifier interface {
	// Subscribe opens one subscription to release announcements for every key
	// of the store's namespace. It returns only once the subscription is
	// active: any release after it returns is delivered.
	Subscribe(ctx context.Context) (Subscription, error)
}

// Subscription delivers release announcements. One Client shares one
// Subscription among all its waiters.
type Subscription interface {
	// Next blocks until a key may have been released and returns it, or until
	// ctx ends. A transient error may mean announcements were missed; the
	// Client then wakes every waiter to look again.
	Next(ctx context.Context) (key string, err error)
	// Close ends the subscription and unblocks Next.
	Close() error
}

// Announcement is one release announcement of an [Announcer]. It only wakes
// waiters: a store never grants a lease or a fence on the word of an
// announcement (anyone allowed to publish on its channel could forge one),
// only from its backend's own atomic operation.
type Announcement struct {
	// Key may have been freed.
	Key string
	// Next, when not empty, is the token of the queued waiter the store will
	// grant Key to next (the head of its FIFO queue): waiters with other
	// queued tokens would be refused and need not look. Empty: anyone may
	// look (the queue was empty, or the store cannot tell).
	Next string
	// Moved, with Next, says that Key was not freed for the waiter Next but
	// that it moved up the queue: it may look again to prepare for its turn
	// (a ZooKeeper waiter learns that its predecessor became the head, so that
	// the release after it needs no request). The Client wakes that waiter
	// as for a release; a Moved announcement is not a release announcement.
	Moved bool
}

// Announcer is implemented by the Subscriptions of [Queuer] stores that name,
// in each announcement, the waiter at the head of the key's queue. The Client
// then wakes only that waiter (and waiters that do not queue) instead of every
// waiter of the key: the others would only be refused, one round trip each.
// When the named waiter is gone, the others look again on their own timers
// (within one renew interval) or at the next announcement.
type Announcer interface {
	// NextAnnouncement is Subscription.Next with the announced successor.
	NextAnnouncement(ctx context.Context) (Announcement, error)
}

// Pusher is implemented by Subscriptions that can hand each announcement to
// a function from the goroutine that learns of it (a store's connection
// reader, say), instead of returning it from Next: a waiter is then woken
// without a goroutine in between. After Push(f) returns true, every later
// announcement goes to f alone, including any the subscription held when
// Push was called, and Next (or NextAnnouncement) returns only when the
// subscription fails or is closed. f does not block and does not call back
// into the subscription. Push returns false when the subscription cannot
// push; it then goes on as before.
type Pusher interface {
	Push(f func(Announcement)) bool
}

// Queuer is implemented by stores that hand a freed key to the waiter that
// has waited longest (FIFO) instead of to whoever asks first. Such a store:
//   - grants a free key to Acquire only if no live waiter is queued ahead of
//     the token (the releaser cannot jump the queue, with or without Queue);
//   - queues the token when Acquire with Request.Queue cannot grant the key,
//     or refreshes its entry; an entry expires TTL after its last refresh, so
//     a waiter that died delays the others by at most one TTL;
//   - removes the token from the queue when it acquires, and on Release of
//     that token (which then returns ErrNotHeld if the token held nothing),
//     announcing the key to a Notifier's subscribers if the key is free;
//   - caps a key's queue (by default at [DefaultMaxWaiters] live waiters):
//     a queued Acquire of a token not yet queued, when the cap is reached,
//     queues nothing and returns a *[QueueFullError]. A token already queued
//     is never refused for that: it keeps its place.
//
// HeldError.Queued tells how many live waiters were queued ahead.
type Queuer interface {
	// QueuesWaiters reports whether the store keeps the queue; a wrapper
	// returns false when the store it wraps does not.
	QueuesWaiters() bool
}

// DefaultMaxWaiters is the default cap of a [Queuer] store's queue of live
// waiters per key. Each waiter costs its client memory (about 10 KiB) and
// the store a queue entry; the cap bounds both.
const DefaultMaxWaiters = 1024

// MaxMaxWaiters is the largest cap of waiters per key a store accepts.
const MaxMaxWaiters = 1 << 20

// CheckMaxWaiters returns an error matching [ErrInvalid] unless n is a
// valid cap of waiters per key: 1 to [MaxMaxWaiters]. Stores check their
// WithMaxWaiters option with it.
func CheckMaxWaiters(n int) error {
	if n < 1 || n > MaxMaxWaiters {
		return Invalid("max waiters", "%d is not between 1 and %d", n, MaxMaxWaiters)
	}
	return nil
}

// Limits describe what a backend can honour; see [Limiter].
type Limits struct {
	// MinTTL is the shortest TTL the store accepts (0: the Client's own minimum).
	MinTTL time.Duration
	// MaxTTL is the longest TTL the store accepts (0: no limit).
	MaxTTL time.Duration
	// MaxKeyLen is the longest key in bytes (0: the Client's own limit).
	MaxKeyLen int
}

// Limiter is implemented by stores with limits tighter than the Client's
// defaults. The Client rejects requests outside them with [ErrInvalid] before
// any round trip.
type Limiter interface {
	Limits() Limits
}
