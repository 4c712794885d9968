// Plain: a Store seen through the base lease.Store interface only.

package memlease

import "github.com/leasekit/lease"

// plainStore embeds the interface, so its method set is lease.Store's alone.
type plainStore struct{ lease.Store }

// Plain returns s seen through the base [lease.Store] interface only: the
// result implements none of [lease.BatchRenewer], [lease.Notifier],
// [lease.Limiter] and [lease.Queuer], so a Client over it renews lease by
// lease, waits for holders' TTLs instead of release announcements, and lets
// its waiters race. Closing it closes s.
func Plain(s *Store) lease.Store { return plainStore{s} }
