// Package driver is the seam between the lease Client and a backend. A store
// is a small adapter: a handful of atomic operations against one backend,
// plus one value that declares what it can do. Everything else — heartbeat,
// retries, deadlines, loss, waiting, wake-ups, input validation, metrics — is
// written once, in package lease.
//
// A new store implements [Store] (and, where the backend allows, one or both
// of [BatchRenewer], [BatchAcquirer], [BatchReleaser] and [Notifier]), and passes the conformance suite
// (package leasetest). Package memlease is the short reference
// implementation: read it first.
//
// # Rules for a store
//
//   - Each method is one atomic operation against the backend, ideally one
//     round trip. A store reads no clock, sleeps, retries or starts
//     goroutines, except a [Subscription]'s reader: the Client owns all
//     timing. Expiry is the backend's (a key's TTL, a session), never a
//     timestamp the store compares.
//   - The Client validates every [Request] against [Caps] before it reaches
//     the store (key, TTL, holder length); a store does not check again.
//   - Fences: a grant's Fence is strictly larger than every fence the store
//     granted for the same key before, across all clients and restarts.
//   - Errors: Acquire on a key held by another token returns an error
//     matching lease.ErrHeld (return a *lease.HeldError, with what the store
//     knows); Renew and Release with a token that no longer holds the key
//     return one matching lease.ErrNotHeld; input the backend cannot accept,
//     lease.ErrInvalid; a full queue, a *lease.QueueFullError; data under
//     the key that the store cannot have written (wrong type, format, NULLs,
//     out-of-range numbers), lease.ErrCorrupt, and never a grant or a panic.
//     Any other error is transient: the Client may retry.
//   - Acquire with the token that already holds the key succeeds again, with
//     the same fence, and refreshes the TTL: a retried Acquire is idempotent.
//
// # FIFO
//
// A store whose Caps.FIFO is true keeps, per key, a queue of waiting tokens,
// and its operations respect it:
//   - Acquire grants a free key only to a token with no live waiter queued
//     ahead of it: neither the releaser nor a newcomer can jump the queue;
//   - Acquire with Request.Queue that cannot grant the key queues the token
//     (or refreshes its entry) and returns a *lease.HeldError whose Queued
//     counts the live waiters ahead; an entry expires TTL after its last
//     refresh, so a dead waiter delays the others by at most one TTL;
//   - a queued Acquire of a token not yet queued, on a queue holding
//     Caps.MaxWaiters live waiters, queues nothing and returns a
//     *lease.QueueFullError; a token already queued keeps its place;
//   - Acquire removes the token from the queue when it grants the key, and
//     Release of a queued token removes its entry.
//
// A store may grant the key to the first waiter as the holder releases it
// (Inspect and HeldError then show that waiter as the holder), and may then
// grant it on the entry's last refresh, without another write
// ([Grant.FromQueue]): a hand-off then costs the waiter one read.
//
// Who looks when, and for how long, is the Client's business: it refreshes
// a waiter's entry well within its TTL, wakes waiters on announcements, and
// leaves the queue when Acquire gives up.
//
// # Shared holds (read-write leases)
//
// A store whose Caps.Shared is true lets many tokens hold a key together
// when their requests say Request.Shared (readers), beside the exclusive
// holds of the other requests (writers). Each reader has its own token and
// TTL; Renew and Release carry the Shared of the acquisition. A key is then
// free, held by one writer, or held by one or more live readers:
//   - an exclusive Acquire is granted only when the key has no live holder
//     of either kind (and, FIFO, no live waiter queued ahead);
//   - a shared Acquire is granted when the key has no live writer and, FIFO,
//     no live exclusive waiter is queued ahead of the token (readers queued
//     ahead are no obstacle: they may share too), so a waiting writer is
//     not starved by readers arriving after it;
//   - queue entries say whether they are shared; a refused request of
//     either kind is queued as for an exclusive one, with the same cap;
//   - fences: an exclusive grant gets a new fence, as always; a shared grant
//     gets the fence of the live readers it joins (the read epoch's), or a
//     new fence when it is the only live reader. So a writer's fence is
//     larger than every earlier grant's, and readers share their epoch's
//     fence until a writer's;
//   - the key is free, and announced, when its writer or its last live
//     reader leaves. An announcement names Next only when the head waiter
//     is exclusive: shared waiters all look;
//   - a *lease.HeldError for a key held by readers gives one reader's
//     holder, the epoch's fence and, as Remaining, the time until the last
//     reader expires; Info says Shared and counts Readers.
//
// A store that cannot keep readers leaves Caps.Shared false: the Client then
// refuses shared acquisitions with errors.ErrUnsupported.
package driver

import (
	"context"
	"time"
)

// Request names one lease operation. The Client fills it in and has
// validated it against the store's [Caps].
type Request struct {
	// Key is the lease name.
	Key string
	// Token is the holder's unique token (32 hex characters, 128 random bits).
	Token string
	// Holder is a human-readable identity kept beside the token.
	Holder string
	// TTL is how long the store keeps the lease, or a queue entry, without a
	// renewal.
	TTL time.Duration
	// Queue asks a FIFO store to queue Token when Acquire cannot grant the
	// key (see the package doc). The Client sets it only when Caps.FIFO.
	Queue bool
	// Shared asks for, renews or releases a shared (reader's) hold (see the
	// package doc). The Client sets it only when Caps.Shared.
	Shared bool
}

// Grant is what a store returns for a successful acquisition.
type Grant struct {
	// Fence is the fencing token (see the package doc).
	Fence uint64
	// Lost, when non-nil, is closed by the store when the lease can no longer
	// be held, independently of renewals (an etcd lease or a ZooKeeper
	// session died). The Client then reports the lease lost at once.
	Lost <-chan struct{}
	// FromQueue says the store granted a queued token the key on the write
	// that refreshed its entry during its last refused Acquire, writing
	// nothing now: the TTL runs from that call's start, and the Client
	// counts its deadline and renewals from then.
	FromQueue bool
}

// Info describes the holder of a key, as Inspect reports it.
type Info struct {
	// Key is the lease name.
	Key string
	// Held is false when nobody holds the key; the other fields are then zero
	// except Fence, which a store may set to the last fence it granted.
	Held bool
	// Holder is the holder's identity, if the store keeps it.
	Holder string
	// Fence is the holder's fencing token.
	Fence uint64
	// Remaining is the store's view of the time left before the lease
	// expires (held by readers: the last of them); 0 when it cannot tell.
	Remaining time.Duration
	// Shared says readers hold the key; Holder is then one of them and
	// Fence their read epoch's.
	Shared bool
	// Readers counts the live readers of a key held shared, when the store
	// can tell (0: unknown, or not shared).
	Readers int
}

// Caps declares what a store can do and the limits it honours. The Client
// reads it once, when it is created, and checks every request against it.
type Caps struct {
	// MinTTL is the shortest TTL the backend honours (0: the Client's own
	// minimum).
	MinTTL time.Duration
	// MaxTTL is the longest TTL the backend honours (0: no limit).
	MaxTTL time.Duration
	// MaxKeyLen is the longest key in bytes (0: the Client's own limit).
	MaxKeyLen int
	// FIFO says the store keeps a queue of waiters per key (see the package
	// doc).
	FIFO bool
	// MaxWaiters is the cap of live waiters per key of a FIFO store, between
	// 1 and MaxMaxWaiters; 0 means DefaultMaxWaiters.
	MaxWaiters int
	// FixedTTL says a lease keeps the TTL it was granted with: Renew renews
	// it by that TTL whatever Request.TTL says (an etcd lease, the session of
	// an advisory lock), so the Client refuses Lease.Extend.
	FixedTTL bool
	// Shared says the store keeps shared holds beside exclusive ones (see
	// the package doc).
	Shared bool
	// MaxBatch bounds the requests of one AcquireMany or ReleaseMany call
	// (0: the Client's own bound, 512), for a store whose batch costs a round
	// trip per request now and then (etcd: granting a lease).
	MaxBatch int
}

// DefaultMaxWaiters is the default cap of live waiters per key of a FIFO
// store. Each waiter costs its client memory (about 10 KiB) and the store a
// queue entry; the cap bounds both.
const DefaultMaxWaiters = 1024

// MaxMaxWaiters is the largest cap of waiters per key.
const MaxMaxWaiters = 1 << 20

// Store is the adapter between the Client and one backend. See the package
// doc for the rules every method follows.
type Store interface {
	// Caps declares the store's capabilities and limits.
	Caps() Caps
	// Acquire takes r.Key for r.Token for r.TTL if the key is free or
	// expired (and, for a FIFO store, no waiter is queued ahead).
	Acquire(ctx context.Context, r Request) (Grant, error)
	// Renew extends the lease to r.TTL from now if r.Token still holds r.Key.
	Renew(ctx context.Context, r Request) error
	// Release frees r.Key if r.Token holds it, and removes r.Token from the
	// key's queue.
	Release(ctx context.Context, r Request) error
	// Inspect reports who holds key. A free key is not an error.
	Inspect(ctx context.Context, key string) (Info, error)
	// Close releases the store's own resources (not a backend client it was
	// given, unless its documentation says so).
	Close() error
}

// BatchRenewer is implemented by stores that renew many leases in one round
// trip. RenewMany returns one error per request, in order, with Renew's
// meaning; if the whole call failed, every element holds that error.
type BatchRenewer interface {
	RenewMany(ctx context.Context, rs []Request) []error
}

// BatchAcquirer is implemented by stores that take many acquisitions in one
// round trip (a pipeline, one statement, one transaction). The Client sends
// it the acquisitions its goroutines have waiting at the same moment.
// AcquireMany returns one Grant and one error per request, in order, each
// with Acquire's meaning for its request alone: one key refused or invalid
// never fails another's. If the whole call failed, every error is that
// error. The Client never puts two requests for the same key in one call.
type BatchAcquirer interface {
	AcquireMany(ctx context.Context, rs []Request) ([]Grant, []error)
}

// BatchReleaser is implemented by stores that release many leases in one
// round trip. ReleaseMany returns one error per request, in order, with
// Release's meaning; if the whole call failed, every element holds that
// error. The Client never puts two requests for the same key in one call.
type BatchReleaser interface {
	ReleaseMany(ctx context.Context, rs []Request) []error
}

// Notifier is implemented by stores that announce releases, so that waiters
// wake as soon as a key is freed instead of when the holder's TTL would run
// out.
type Notifier interface {
	// Subscribe opens one subscription to the release announcements of every
	// key of the store. It returns once the subscription is active: any
	// release after it returns is announced.
	Subscribe(ctx context.Context) (Subscription, error)
}

// Subscription delivers release announcements. One Client shares one
// Subscription among all its waiters; its reader is the only goroutine a
// store may run.
type Subscription interface {
	// Next blocks until a key may have been released, or ctx ends. An error
	// may mean announcements were lost: the Client then wakes every waiter
	// and subscribes again.
	Next(ctx context.Context) (Announcement, error)
	// Close ends the subscription and unblocks Next.
	Close() error
}

// Announcement says that a key may have been released. It only wakes
// waiters: nobody is granted anything on its word (anyone allowed to publish
// on the backend's channel could forge one).
type Announcement struct {
	// Key may be free.
	Key string
	// Next, when not empty, is the queued token a FIFO store will grant Key
	// to next: the Client then wakes only that waiter, the others would be
	// refused. Empty: every waiter of Key looks.
	Next string
}
