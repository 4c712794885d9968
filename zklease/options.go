// Options of New and Dial.

package zklease

import (
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"
)

// DefaultRoot is the znode under which a Store keeps its keys by default.
const DefaultRoot = "/leasekit"

// Option configures a Store (New and Dial).
type Option func(*config)

type config struct {
	root           string
	acl            []zk.ACL
	aclSet         bool
	sessionTimeout time.Duration // Caps.MaxTTL: given to New, negotiated by Dial
	dialer         zk.Dialer     // Dial only
	logger         *slog.Logger  // Dial only
	auth           []authInfo    // Dial only
	maxWaiters     int
}

type authInfo struct {
	scheme string
	auth   []byte
}

// WithRoot sets the znode under which keys live (default "/leasekit"),
// created when missing. Stores sharing a root share keys.
func WithRoot(path string) Option { return func(c *config) { c.root = path } }

// WithACL sets the ACL of every node the Store creates. The default is the
// creator ACL, zk.AuthACL(zk.PermAll), for a Store made by Dial with
// WithAuth, and zk.WorldACL(zk.PermAll) otherwise: anyone may then read the
// tokens and delete the nodes. Every store of a root needs all permissions
// on its nodes. An explicit WithACL also turns off Dial's check of the root.
func WithACL(acl ...zk.ACL) Option { return func(c *config) { c.acl, c.aclSet = acl, true } }

// WithSessionTimeout tells New the session timeout the server negotiated
// for its connection: the longest TTL the Store accepts. Dial ignores it.
func WithSessionTimeout(d time.Duration) Option { return func(c *config) { c.sessionTimeout = d } }

// WithDialer sets the function Dial connects with (TLS, proxies, tests).
func WithDialer(d zk.Dialer) Option { return func(c *config) { c.dialer = d } }

// WithLogger receives the ZooKeeper library's log messages (default:
// discarded). New ignores it.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithAuth makes Dial authenticate the connection (conn.AddAuth), e.g.
// WithAuth("digest", []byte("user:password")); without WithACL the Store
// then uses the creator ACL (see Dial). With New, call conn.AddAuth
// yourself and pass WithACL(zk.AuthACL(zk.PermAll)...).
func WithAuth(scheme string, auth []byte) Option {
	return func(c *config) { c.auth = append(c.auth, authInfo{scheme, auth}) }
}

// WithMaxWaiters caps each key's queue of waiters at n (default
// driver.DefaultMaxWaiters); n below 1 is refused with lease.ErrInvalid.
// Stores that share a root should use the same cap.
func WithMaxWaiters(n int) Option { return func(c *config) { c.maxWaiters = n } }
