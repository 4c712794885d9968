// The operator's side of a store: listing keys and breaking leases.

package driver

import (
	"context"
	"time"
)

// Entry is one key as [Lister.List] and [Breaker.Break] report it.
type Entry struct {
	// Key is the lease name.
	Key string
	// Holders are the key's live holders: its writer, or each live reader
	// (in no set order). Empty: the key is free.
	Holders []Holder
	// Waiters are the live entries of the key's queue, head first (FIFO
	// stores only).
	Waiters []Waiter
	// Broken are the tokens a Break evicted from the key whose tombstones
	// live (see [Breaker]); a store may leave it empty where it cannot tell.
	Broken []string
}

// Holder is one live hold of a key.
type Holder struct {
	// Token is the hold's token. It is the Client's to see: the Client
	// shows operators only a digest of it.
	Token string
	// Holder is the holder's identity, as the Request said.
	Holder string
	// Fence is the hold's fence (a reader's: its read epoch's).
	Fence uint64
	// Remaining is the store's view of the time left before the hold
	// expires; 0 when it cannot tell.
	Remaining time.Duration
	// Shared says the hold is a reader's.
	Shared bool
}

// Waiter is one live entry of a key's queue.
type Waiter struct {
	// Token is the waiter's token (see Holder.Token).
	Token string
	// Shared says the waiter asks for a shared hold.
	Shared bool
	// Remaining is the time before the entry expires unless refreshed; 0
	// when the store cannot tell.
	Remaining time.Duration
}

// Lister is implemented by stores that can list their keys, a page at a
// time, so that a store of 100,000 keys is never loaded at once.
type Lister interface {
	// List returns about limit keys whose names start with prefix and that
	// have a live holder, a live waiter or a live tombstone, resuming after
	// cursor ("" starts the listing). next is the cursor of the following
	// page, "" when the listing is over; a page may be short, even empty,
	// before the end (keys scanned were free). Keys come in the order of the
	// store's choosing, each once, except that a key may come twice where
	// the backend's own scan repeats it (Redis SCAN during a rehash); a key
	// held or freed during the listing may be missed. Each Entry is one
	// consistent view of its key, as Inspect's.
	List(ctx context.Context, prefix, cursor string, limit int) (page []Entry, next string, err error)
}

// Breaker is implemented by stores that can break a lease: free a key
// whatever token holds it, as an operator does when a holder is stuck.
type Breaker interface {
	// Break frees key in one atomic step: it removes its writer or every
	// reader, keeps its queue, announces the key as Release does, and leaves
	// a tombstone for each evicted token that lives at least as long as the
	// evicted hold would have. Until a tombstone expires, Renew (and
	// RenewMany) of its token returns an error matching lease.ErrBroken,
	// which matches lease.ErrNotHeld too, and Release of it one matching
	// lease.ErrNotHeld. The next grant's fence is larger than the evicted
	// holds' (the rule of every grant). Break closes no Grant.Lost channel:
	// the evicted holder learns of the break at its next renewal. Where the
	// backend ties holds to a session that Break must end (PostgreSQL's
	// advisory locks), the store's docs say what else that session held.
	// Break returns the key as it was before the break; breaking a free key
	// changes nothing and returns it with no Holders.
	Break(ctx context.Context, key string) (Entry, error)
}
