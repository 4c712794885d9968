// Plain: a Store seen through the base driver.Store interface only.

package memlease

import (
	"github.com/leasekit/lease/driver"
)

// plainStore embeds the interface, so its method set is driver.Store's alone.
type plainStore struct{ driver.Store }

// Caps reports the inner store's limits without FIFO.
func (p plainStore) Caps() driver.Caps {
	c := p.Store.Caps()
	c.FIFO, c.MaxWaiters = false, 0
	return c
}

// Plain returns s seen through the base [driver.Store] interface only: the
// result implements none of [driver.BatchRenewer], [driver.Notifier],
// [lease.Limiter] and [lease.Queuer], so a Client over it renews lease by
// lease, waits for holders' TTLs instead of release announcements, and lets
// its waiters race. Closing it closes s.
func Plain(s *Store) driver.Store { return plainStore{s} }
