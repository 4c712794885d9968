// Options of the Redis store.

package redislease

import "strings"

// DefaultPrefix is the key prefix when WithPrefix is not given.
const DefaultPrefix = "lease:"

type config struct {
	prefix string
	ack    replicaAck // WithReplicaAck (replicaack.go)
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

func validPrefix(p string) bool { return !strings.ContainsAny(p, "{}") }
