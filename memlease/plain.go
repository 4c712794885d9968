// Plain: a Store seen through the base lease.Store interface only.

package memlease

import "github.com/leasekit/lease"

// plainStore embeds the interface, so its method set is lease.Store's alone.
type plainStore struct{ lease.Store }

// Plain returns s seen through the base [lease.Store] interface only: the
// result implements neither [lease.BatchRenewer], [lease.Notifier] nor
// [lease.Limiter], so a Client over it renews lease by lease and waits for
// holders' TTLs instead of release announcements. Closing it closes s.
func Plain(s *Store) lease.Store { return plainStore{s} }
