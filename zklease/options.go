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
	aclSet         bool          // WithACL was given
	sessionTimeout time.Duration // New: the negotiated session timeout, as the caller knows it
	dialer         zk.Dialer     // Dial only
	logger         *slog.Logger  // Dial only
	auth           []authInfo    // Dial only
	maxWaiters     int
}

type authInfo struct {
	scheme string
	auth   []byte
}

// WithRoot sets the znode under which keys live (default "/leasekit"): key k
// is the container node <root>/<escaped k>, whose children are the holder
// nodes. The root is created (persistent) when missing. Stores sharing a
// root share keys.
func WithRoot(path string) Option { return func(c *config) { c.root = path } }

// WithACL sets the ACL of the nodes the Store creates (the root and its
// missing ancestors, the key parents and the holder nodes). The default is
// the creator ACL, zk.AuthACL(zk.PermAll), for a Store made by Dial with
// WithAuth (see Dial), and zk.WorldACL(zk.PermAll) otherwise: anonymous
// stores make nodes that anyone can read (the tokens), delete and create
// beside. For a digest ACL use zk.DigestACL(zk.PermAll, user, password) and
// authenticate the connection with the same identity: conn.AddAuth("digest",
// []byte(user+":"+password)) with New, or WithAuth with Dial. Every store of
// a root needs read, write, create and delete permission on all its nodes
// (an acquirer deletes the expired node of another holder). An explicit
// WithACL also turns off Dial's check of the root's ACL.
func WithACL(acl ...zk.ACL) Option { return func(c *config) { c.acl, c.aclSet = acl, true } }

// WithSessionTimeout tells New the session timeout the server negotiated for
// the connection it is given (go-zookeeper v1.0.4 does not expose it). The
// Store rejects lease TTLs longer than it: ZooKeeper deletes a holder node at
// most that long after the holder's last contact, so a longer TTL would let
// another client acquire the key before the holder's local deadline. New
// requires it; Dial learns the negotiated value itself and ignores it.
func WithSessionTimeout(d time.Duration) Option { return func(c *config) { c.sessionTimeout = d } }

// WithDialer sets the function Dial connects to servers with (TLS, proxies,
// tests that cut connections). New ignores it.
func WithDialer(d zk.Dialer) Option { return func(c *config) { c.dialer = d } }

// WithLogger receives the ZooKeeper client library's log messages (default:
// discarded). New ignores it.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithAuth makes Dial authenticate the connection (conn.AddAuth) before the
// Store uses it, e.g. WithAuth("digest", []byte("user:password")). Without
// WithACL, the Store then creates its nodes with the creator ACL (that
// identity only) and refuses a root open to anyone (see Dial). The library
// re-sends it after reconnecting. New ignores it: call conn.AddAuth
// yourself, and pass WithACL(zk.AuthACL(zk.PermAll)...) for the creator ACL.
func WithAuth(scheme string, auth []byte) Option {
	return func(c *config) { c.auth = append(c.auth, authInfo{scheme, auth}) }
}

// WithMaxWaiters caps each key's queue of waiters at n (default
// [lease.DefaultMaxWaiters]): a queued Acquire of a token not yet queued
// creates its node, and deletes it again at once (one more round trip) and
// fails with a *[lease.QueueFullError] when the listing that follows finds
// more than n nodes before it (the lowest being the holder). Sequence
// numbers fix a node's place when it is created and the nodes ahead only
// ever leave, so the entries kept never exceed n (n+1 while the key is free
// and reserved for the first waiter); while a node beyond the cap is being
// deleted, or while a concurrent unqueued Acquire's brief node exists, a
// newcomer may be refused although room is left.
// New and Dial refuse n outside 1..[lease.MaxMaxWaiters] with an error
// matching [lease.ErrInvalid]. Stores that share a root should use the same
// cap.
func WithMaxWaiters(n int) Option { return func(c *config) { c.maxWaiters = n } }
