// Options of the etcd store.

package etcdlease

// DefaultPrefix is the key prefix when WithPrefix is not given.
const DefaultPrefix = "/leasekit/"

type config struct {
	prefix string
}

// Option configures a Store.
type Option func(*config)

// WithPrefix sets the prefix of every etcd key the store uses (default
// [DefaultPrefix]). Stores with the same prefix on the same cluster share
// leases; the release watch covers exactly the keys under the prefix, so a
// prefix should not be a prefix of another namespace's (end it with "/").
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}
