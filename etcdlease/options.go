// Options of the etcd store.

package etcdlease

// DefaultPrefix is the key prefix when WithPrefix is not given.
const DefaultPrefix = "/leasekit/"

type config struct {
	prefix     string
	maxWaiters int
}

// Option configures a Store.
type Option func(*config)

// WithPrefix sets the prefix of every etcd key the store uses (default
// [DefaultPrefix]); "/" is appended if it does not end in one, and a prefix
// with a NUL byte is refused. Stores with the same prefix on the same
// cluster share leases. Each lease key is one escaped path segment under
// the prefix, so nested namespaces ("/app/" and "/app/sub/") never share a
// lease; the outer one's watches still see the inner one's traffic, and
// ignore it.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithMaxWaiters caps each key's queue at n live waiters (default
// [driver.DefaultMaxWaiters]); a newcomer beyond it gets a
// *[lease.QueueFullError]. An entry over the cap is revoked at once, so
// while one is being revoked a concurrent newcomer may be refused although
// room is left. New refuses n outside 1..[driver.MaxMaxWaiters]. Stores that
// share a prefix should use the same cap.
func WithMaxWaiters(n int) Option {
	return func(c *config) { c.maxWaiters = n }
}
