package lease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/lease/driver"
)

// The operator's side: listing every key of a store and breaking a lease.

// Kind says what a key listed by Client.List is.
type Kind string

// Kinds of keys.
const (
	KindFree      Kind = "free"      // no live holder (only waiters or tombstones)
	KindExclusive Kind = "exclusive" // held by one writer
	KindShared    Kind = "shared"    // held by one or more readers
	KindSemaphore Kind = "semaphore" // a slot of a semaphore (SlotKey), held
)

// KeyInfo is one key of a store, as Client.List and ForceRelease report it.
type KeyInfo struct {
	Key  string
	Kind Kind
	// Semaphore, Slot and N name the semaphore of a slot key (KindSemaphore).
	Semaphore string
	Slot, N   int
	// Holders are the live holds: the writer, or each reader.
	Holders []HolderInfo
	// Waiters are the queued waiters, head first (FIFO stores).
	Waiters []WaiterInfo
	// Broken are the IDs of the holds a break evicted whose tombstones
	// still live, where the store can tell.
	Broken []string
}

// HolderInfo is one live hold of a listed key.
type HolderInfo struct {
	// ID is a short digest of the hold's token: it tells holds apart
	// without showing the token, which would let anyone renew or release it.
	ID        string
	Holder    string
	Fence     uint64
	Remaining time.Duration
	Shared    bool
}

// WaiterInfo is one waiter of a listed key.
type WaiterInfo struct {
	ID        string // a digest of the waiter's token, as HolderInfo.ID
	Shared    bool
	Remaining time.Duration // before the entry expires unless its waiter refreshes it
}

// Fence returns the largest fence among the holds (0: free).
func (k KeyInfo) Fence() uint64 {
	var f uint64
	for _, h := range k.Holders {
		f = max(f, h.Fence)
	}
	return f
}

// listPage is how many keys List asks the store for at a time.
const listPage = 500

// List returns every key of the store whose name starts with prefix and
// that is held, has waiters or was just broken, a page at a time: the
// listing never holds more than a page of keys. Keys come in the store's
// order (sort them for display); a key may appear twice where the
// backend's scan repeats it. A store that cannot list yields one error
// matching errors.ErrUnsupported.
func (c *Client) List(ctx context.Context, prefix string) iter.Seq2[KeyInfo, error] {
	return func(yield func(KeyInfo, error) bool) {
		ls, ok := c.store.(driver.Lister)
		if !ok {
			yield(KeyInfo{}, fmt.Errorf("lease: list: the store %T cannot list its keys: %w", c.store, errors.ErrUnsupported))
			return
		}
		if strings.IndexByte(prefix, 0) >= 0 || len(prefix) > MaxKeyLen {
			yield(KeyInfo{}, Invalid("prefix", "longer than %d bytes or contains a NUL byte", MaxKeyLen))
			return
		}
		cursor := ""
		for {
			page, next, err := ls.List(ctx, prefix, cursor, listPage)
			if err != nil {
				yield(KeyInfo{}, fmt.Errorf("lease: list %q: %w", prefix, err))
				return
			}
			for _, e := range page {
				if !yield(keyInfo(e), nil) {
					return
				}
			}
			if next == "" {
				return
			}
			if next == cursor {
				yield(KeyInfo{}, fmt.Errorf("lease: list %q: the store %T returned its cursor again", prefix, c.store))
				return
			}
			cursor = next
		}
	}
}

// ForceRelease breaks key: it frees the key whatever token holds it (its
// writer, or every reader), keeps its waiters, and returns what it held.
// The next grant's fence is larger than the evicted holds', so a data layer
// that checks fences refuses the evicted holder's writes; the evicted
// holder learns of it at its next renewal: its lease is lost with
// LossBroken and an error matching ErrBroken. A free key is not an error
// (the KeyInfo then has no Holders). A store that cannot break leases
// returns an error matching errors.ErrUnsupported.
//
// Breaking a lease is for an operator whose holder is stuck: a live holder
// keeps working until its next renewal, so its writes must be fenced.
func (c *Client) ForceRelease(ctx context.Context, key string) (KeyInfo, error) {
	if err := c.validKey(key); err != nil {
		return KeyInfo{}, err
	}
	br, ok := c.store.(driver.Breaker)
	if !ok {
		return KeyInfo{}, fmt.Errorf("lease: force release %q: the store %T cannot break leases: %w", key, c.store, errors.ErrUnsupported)
	}
	e, err := br.Break(ctx, key)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("lease: force release %q: %w", key, err)
	}
	k := keyInfo(e)
	now := c.clock.Now()
	var evs []Event
	for _, h := range k.Holders {
		evs = append(evs, Event{Kind: EventBroken, Key: key, Holder: h.Holder, Fence: h.Fence, Time: now, Shared: h.Shared})
		c.log.Warn("lease: broken by force", "key", key, "holder", h.Holder, "fence", h.Fence, "id", h.ID)
	}
	c.mu.Lock()
	c.unlockEmit(evs...)
	return k, nil
}

// keyInfo converts a store's Entry, hiding tokens behind digests.
func keyInfo(e driver.Entry) KeyInfo {
	k := KeyInfo{Key: e.Key, Kind: KindFree}
	for _, tok := range e.Broken {
		k.Broken = append(k.Broken, digest(tok))
	}
	for _, h := range e.Holders {
		holder, n := untag(h.Holder)
		k.Holders = append(k.Holders, HolderInfo{ID: digest(h.Token), Holder: holder, Fence: h.Fence, Remaining: h.Remaining, Shared: h.Shared})
		switch {
		case n > 0:
			k.Kind, k.N = KindSemaphore, n
		case h.Shared:
			k.Kind = KindShared
		default:
			k.Kind = KindExclusive
		}
	}
	if k.Kind == KindSemaphore {
		if i := strings.LastIndex(e.Key, "#sem"); i >= 0 {
			if slot, err := strconv.Atoi(e.Key[i+len("#sem"):]); err == nil {
				k.Semaphore, k.Slot = e.Key[:i], slot
			}
		}
	}
	for _, w := range e.Waiters {
		k.Waiters = append(k.Waiters, WaiterInfo{ID: digest(w.Token), Shared: w.Shared, Remaining: w.Remaining})
	}
	return k
}

// untag splits a semaphore's tag off a holder: the holder and n (0: none).
func untag(holder string) (string, int) {
	i := strings.LastIndex(holder, semTag)
	if i < 0 || !strings.HasSuffix(holder, "]") {
		return holder, 0
	}
	n, err := strconv.Atoi(holder[i+len(semTag) : len(holder)-1])
	if err != nil || n < 1 {
		return holder, 0
	}
	return holder[:i], n
}

// digest is a token's public ID: 8 hex digits of its SHA-256.
func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:4])
}
