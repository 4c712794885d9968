// The Store: construction (New, Dial), the session, Caps and Close.

package zklease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

var (
	_ driver.Store         = (*Store)(nil)
	_ driver.BatchRenewer  = (*Store)(nil)
	_ driver.BatchAcquirer = (*Store)(nil)
	_ driver.BatchReleaser = (*Store)(nil)
	_ driver.Notifier      = (*Store)(nil)
)

// Store is a driver.Store on ZooKeeper, safe for concurrent use.
type Store struct {
	config
	conn *zk.Conn

	entries sync.Map // token → entry: the nodes this Store made or found

	mu   sync.Mutex
	lost chan struct{}              // closed when the session ends; nil for New and once closed
	subs map[*subscription]struct{} // nil once the Store is closed
	keys []string                   // the root's children, sorted, as List last read them
}

// entry is what a Store remembers of a token's node, to renew, claim and
// release it in one round trip.
type entry struct {
	key, path string
	version   int32
	mtime     int64 // server time of our last write, ms
	ttlMs     int64 // the TTL of that write
	czxid     int64 // the fence, unless epoch
	epoch     int64 // a reader's fence: the read epoch's it joined (0: czxid)
	holder    string
	held      bool // granted; otherwise a queued waiter's entry
}

func (e entry) fence() uint64 { return uint64(cmp.Or(e.epoch, e.czxid)) }

// New returns a Store over conn, which the caller made with zk.Connect and
// keeps owning. WithSessionTimeout is required: the session timeout the
// server negotiated, or less. A Store made by New cannot see session
// events: its grants carry no Lost channel.
func New(conn *zk.Conn, opts ...Option) (*Store, error) {
	if conn == nil {
		return nil, lease.Invalid("store", "nil *zk.Conn")
	}
	s, err := configure(opts)
	if err == nil {
		s.conn = conn
	}
	return s, err
}

// configure returns a Store, without a connection, configured by opts.
func configure(opts []Option) (*Store, error) {
	s := &Store{config: config{root: DefaultRoot, maxWaiters: driver.DefaultMaxWaiters, acl: zk.WorldACL(zk.PermAll)}, subs: make(map[*subscription]struct{})}
	for _, o := range opts {
		if o == nil {
			return nil, lease.Invalid("option", "nil option")
		}
		o(&s.config)
	}
	switch r := s.root; {
	case r == "/" || path.Clean(r) != r || !path.IsAbs(r) || strings.HasPrefix(r+"/", "/zookeeper/"):
		return nil, lease.Invalid("root", "%q is not a clean absolute znode path below / outside /zookeeper", r)
	case len(s.acl) == 0:
		return nil, lease.Invalid("acl", "empty ACL")
	case s.maxWaiters < 1:
		return nil, lease.Invalid("max waiters", "%d is below 1", s.maxWaiters)
	case s.sessionTimeout <= 0:
		return nil, lease.Invalid("session timeout", "%v is not positive (New needs WithSessionTimeout)", s.sessionTimeout)
	}
	return s, nil
}

// ErrOpenRoot is returned by Dial when the Store has credentials (WithAuth,
// no WithACL) and its root already exists with an ACL that lets anyone do
// more than read it: anyone could then create a key's node first and list
// and delete the holder nodes under it. It also matches lease.ErrInvalid.
var ErrOpenRoot = errors.New("zklease: root open to anyone")

// checkRoot refuses a root whose ACL grants world:anyone more than read. A
// missing root is fine (the Store creates it with its own ACL), and so is
// one we may not read the ACL of.
func checkRoot(conn *zk.Conn, root string) error {
	acl, _, err := conn.GetACL(root)
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNoAuth) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("zklease: read the ACL of %s: %w", root, err)
	}
	for _, a := range acl {
		if a.Scheme == "world" && a.ID == "anyone" && a.Perms&^zk.PermRead != 0 {
			return fmt.Errorf("%w: %w", ErrOpenRoot, lease.Invalid("root",
				"%s grants world:anyone permissions %#x, more than read: restrict it (setAcl) or use another root", root, a.Perms))
		}
	}
	return nil
}

// Dial connects to servers (host:port) asking for sessionTimeout, waits
// until the session is established (or ctx ends) and returns a Store that
// owns the connection: Close ends the session and frees its leases.
//
// The server clamps the session timeout (by default to [2, 20] × tickTime);
// the negotiated value is Caps().MaxTTL. When the session expires, the Lost
// channel of every grant made in it is closed.
//
// With WithAuth and no WithACL, every node the Store creates carries the
// creator ACL, zk.AuthACL(zk.PermAll), and Dial refuses a root that exists
// and lets anyone do more than read it (ErrOpenRoot).
func Dial(ctx context.Context, servers []string, sessionTimeout time.Duration, opts ...Option) (*Store, error) {
	if len(servers) == 0 {
		return nil, lease.Invalid("servers", "empty server list")
	}
	s, err := configure(append(opts[:len(opts):len(opts)], WithSessionTimeout(sessionTimeout)))
	if err != nil {
		return nil, err
	}
	if s.dialer == nil {
		s.dialer = net.DialTimeout
	}
	s.lost = make(chan struct{}) // Close closes conn
	w := &watcher{store: s, ready: make(chan time.Duration, 1)}
	conn, _, err := zk.Connect(servers, sessionTimeout,
		zk.WithLogger(w), zk.WithLogInfo(true), zk.WithEventCallback(w.event), zk.WithDialer(s.dialer))
	if err != nil {
		return nil, fmt.Errorf("zklease: connect: %w", err)
	}
	select {
	case s.sessionTimeout = <-w.ready:
	case <-ctx.Done():
		err = fmt.Errorf("zklease: no session with %s: %w", strings.Join(servers, ","), ctx.Err())
	}
	for i := 0; err == nil && i < len(s.auth); i++ {
		if err = conn.AddAuth(s.auth[i].scheme, s.auth[i].auth); err != nil {
			err = fmt.Errorf("zklease: add auth %q: %w", s.auth[i].scheme, err)
		}
	}
	if err == nil && !s.aclSet && len(s.auth) > 0 {
		s.acl = zk.AuthACL(zk.PermAll)
		err = checkRoot(conn, s.root)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	s.conn = conn
	return s, nil
}

// watcher receives the library's log messages and session events for a
// Store made by Dial, on the library's goroutines.
type watcher struct {
	store *Store
	ready chan time.Duration // the negotiated session timeout; Dial takes the first
}

// authenticatedFormat is what go-zookeeper v1.0.4 logs after each session
// handshake: the only place it reveals the negotiated session timeout.
const authenticatedFormat = "authenticated: id=%d, timeout=%d"

// Printf implements zk.Logger.
func (w *watcher) Printf(format string, args ...any) {
	if format == authenticatedFormat && len(args) == 2 {
		if ms, ok := args[1].(int32); ok {
			select {
			case w.ready <- time.Duration(ms) * time.Millisecond:
			default: // a later session's
			}
		}
	}
	if l := w.store.logger; l != nil {
		l.Debug(fmt.Sprintf(format, args...), "component", "zk")
	}
}

// event is the connection's event callback.
func (w *watcher) event(ev zk.Event) {
	if ev.Type == zk.EventSession && ev.State == zk.StateExpired {
		w.store.sessionEnded()
	}
}

// sessionEnded closes the Lost channel of the session's grants and forgets
// its nodes (ZooKeeper deleted them).
func (s *Store) sessionEnded() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != nil {
		close(s.lost)
		s.lost = nil
	}
	if s.subs != nil { // not closed
		s.lost = make(chan struct{})
	}
	s.entries.Clear()
}

// Conn returns the ZooKeeper connection the Store uses.
func (s *Store) Conn() *zk.Conn { return s.conn }

// Root returns the znode under which the Store keeps its keys.
func (s *Store) Root() string { return s.root }

// Caps implements driver.Store: FIFO, shared holds, and a TTL of at most
// the session timeout, so the session never outlives the Client's deadline.
func (s *Store) Caps() driver.Caps {
	return driver.Caps{MaxTTL: s.sessionTimeout, FIFO: true, MaxWaiters: s.maxWaiters, Shared: true, MaxBatch: maxBatch}
}

// Close ends the Store's subscriptions and, for a Store made by Dial, closes
// the connection (which deletes its nodes) and the Lost channels.
func (s *Store) Close() error {
	s.mu.Lock()
	for sub := range s.subs {
		close(sub.changed)
	}
	own := s.lost != nil && s.subs != nil // made by Dial, and not closed yet
	s.subs = nil
	s.mu.Unlock()
	if own {
		s.conn.Close()
		s.sessionEnded()
	}
	return nil
}

var errClosed = errors.New("zklease: store closed")

// usable checks ctx and that the Store is open, and returns the Lost
// channel for a grant made now.
func (s *Store) usable(ctx context.Context) (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		return nil, errClosed
	}
	return s.lost, ctx.Err()
}

// parent is the znode of key.
func (s *Store) parent(key string) string { return s.root + "/" + escapeKey(key) }

// remembered returns r's entry, if the Store has one for r.Key.
func (s *Store) remembered(r driver.Request) (entry, bool) {
	v, _ := s.entries.Load(r.Token)
	if e, ok := v.(entry); ok && e.key == r.Key {
		return e, true
	}
	return entry{}, false
}

// ensureParent creates key's parent, a container node (the server deletes
// it once empty), and the root (persistent) if it is missing.
func (s *Store) ensureParent(parent string) error {
	_, err := s.conn.CreateContainer(parent, nil, zk.FlagContainer, s.acl)
	if errors.Is(err, zk.ErrNoNode) {
		for i := 1; i <= len(s.root); i++ {
			if i == len(s.root) || s.root[i] == '/' {
				if _, err := s.conn.Create(s.root[:i], nil, zk.FlagPersistent, s.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
					return fmt.Errorf("zklease: create %s: %w", s.root[:i], err)
				}
			}
		}
		_, err = s.conn.CreateContainer(parent, nil, zk.FlagContainer, s.acl)
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("zklease: create %s: %w", parent, err)
	}
	return nil
}
