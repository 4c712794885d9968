// Listing keys and breaking leases (driver.Lister, driver.Breaker).

package memlease

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/fifo"
)

var _ driver.Lister = (*Store)(nil)
var _ driver.Breaker = (*Store)(nil)

// List returns up to limit live keys starting with prefix, in byte order,
// after cursor (the last key of the previous page).
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	st, now, err := s.lock("list")
	if err != nil {
		return nil, "", err
	}
	defer st.mu.Unlock()
	var names []string
	for key := range st.keys {
		if strings.HasPrefix(key, prefix) && key > cursor {
			names = append(names, key)
		}
	}
	slices.Sort(names)
	var page []driver.Entry
	for i, key := range names {
		if i == max(limit, 1) {
			return page, names[i-1], nil
		}
		if e := st.entry(key, now); len(e.Holders)+len(e.Waiters)+len(e.Broken) > 0 {
			page = append(page, e)
		}
	}
	return page, "", nil
}

// Break frees key whoever holds it, leaving tombstones for the evicted
// tokens, and announces it.
func (s *Store) Break(ctx context.Context, key string) (driver.Entry, error) {
	st, now, err := s.lock("break")
	if err != nil {
		return driver.Entry{}, err
	}
	defer st.mu.Unlock()
	e := st.entry(key, now)
	k := st.keys[key]
	if len(e.Holders) == 0 {
		return e, nil
	}
	if k.broken == nil {
		k.broken = make(map[string]time.Time)
	}
	for _, h := range e.Holders {
		k.broken[h.Token] = now.Add(h.Remaining)
	}
	k.token, k.readers = "", make(map[string]reader)
	st.announce(key, k, now)
	return e, nil
}

// entry describes key at now; st.mu is held.
func (st *state) entry(key string, now time.Time) driver.Entry {
	e := driver.Entry{Key: key}
	k := st.keys[key]
	if k == nil {
		return e
	}
	k.prune(now)
	if k.held(now) {
		e.Holders = append(e.Holders, driver.Holder{Token: k.token, Holder: k.holder, Fence: k.fence, Remaining: k.expires.Sub(now)})
	}
	for tok, rd := range k.readers {
		e.Holders = append(e.Holders, driver.Holder{Token: tok, Holder: rd.holder, Fence: k.fence, Remaining: rd.expires.Sub(now), Shared: true})
	}
	for _, w := range fifo.Live(k.queue, st.nanos(now)) {
		e.Waiters = append(e.Waiters, driver.Waiter{Token: w.Token, Shared: w.Shared, Remaining: time.Duration(w.Expires - st.nanos(now))})
	}
	for tok, until := range k.broken {
		if now.Before(until) {
			e.Broken = append(e.Broken, tok)
		} else {
			delete(k.broken, tok)
		}
	}
	return e
}

// brokenErr returns ErrBroken if token's hold of k was broken; k may be nil.
func (k *record) brokenErr(op, key, token string, now time.Time) error {
	if k != nil && now.Before(k.broken[token]) {
		return fmt.Errorf("memlease: %s %q: %w", op, key, lease.ErrBroken)
	}
	return fmt.Errorf("memlease: %s %q: %w", op, key, lease.ErrNotHeld)
}
