// Options of the Redis store.

package redislease

import "strings"

// DefaultPrefix is the key prefix when WithPrefix is not given.
const DefaultPrefix = "lease:"

type config struct {
	prefix string
	ack    replicaAck // WithReplicaAck (replicaack.go)

	maxWaiters int // WithMaxWaiters
}

// Option configures a Store.
type Option func(*config)

// WithPrefix sets the namespace prefix of every Redis key and of the release
// channel (default [DefaultPrefix]). Stores with the same prefix on the same
// Redis share leases; the prefix must not contain '{' or '}', which would
// break the Redis Cluster hash tag.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithMaxWaiters caps each key's queue of waiters at n (default
// [lease.DefaultMaxWaiters]): a queued Acquire of a token not yet queued,
// when the queue holds n live waiters, queues nothing and fails with a
// *[lease.QueueFullError]. The cap is exact: the acquire script counts the
// queue and adds to it atomically. New refuses n outside
// 1..[lease.MaxMaxWaiters] with an error matching [lease.ErrInvalid].
// Stores that share a prefix should use the same cap: each enforces its own
// on the waiters it adds.
func WithMaxWaiters(n int) Option {
	return func(c *config) { c.maxWaiters = n }
}

func validPrefix(p string) bool { return !strings.ContainsAny(p, "{}") }
