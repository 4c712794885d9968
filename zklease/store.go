// The Store: construction (New, Dial), session tracking, limits and Close.

package zklease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
)

// Compile-time checks of the interfaces a Store implements.
var (
	_ lease.Store        = (*Store)(nil)
	_ lease.BatchRenewer = (*Store)(nil)
	_ lease.Notifier     = (*Store)(nil)
	_ lease.Limiter      = (*Store)(nil)
)

// Store is a lease.Store on ZooKeeper. It is safe for concurrent use. See
// the package documentation for the model.
type Store struct {
	conn    *zk.Conn
	own     bool // Dial made conn: Close closes it
	root    string
	acl     []zk.ACL
	maxTTL  time.Duration
	tracked bool // session expiry is reported (Dial)

	maxWaiters int // WithMaxWaiters: the cap of each key's queue

	mu     sync.Mutex
	grants map[string]*grant // by token: nodes this store granted, renewed or queued
	// Dial-made stores (their event callback sees each watch event): the
	// node whose deletion makes a queued entry of ours the lowest (its only
	// predecessor, watched) -> that entry; the entries whose predecessor's
	// deletion was seen, by token; the last deleted watched nodes.
	handoffs map[string]handoff
	handed   map[string]string // token -> entry path
	deleted  [64]string
	ndeleted int
	lost     chan struct{}              // closed when the current session ends; nil if not tracked
	subs     map[*subscription]struct{} // open subscriptions
	closed   bool
}

// grant is what a Store remembers of a node it granted or queued, to renew,
// refresh and release it in one round trip.
type grant struct {
	key     string
	path    string
	version int32     // data version after our last write
	mtime   int64     // server time of our last write (ms)
	ttlMs   int64     // TTL of our last write
	waiting bool      // the node is a queued waiter's entry, not the holder
	marked  bool      // the node's data carries the waiting mark
	czxid   int64     // the node's creation zxid: the holder's fence
	wrote   time.Time // local time just before our last write was sent
}

// New returns a Store over conn, which the caller made with zk.Connect and
// keeps owning (Close does not close it). WithSessionTimeout is required:
// the session timeout the server negotiated, or less.
//
// A Store made by New cannot see session events, so its grants carry no Lost
// channel: after a session expiry the lease is reported lost by the next
// renewal (the holder node is gone: lease.ErrNotHeld), at the latest at the
// Client's local deadline. Dial makes a Store that reports expiry at once.
func New(conn *zk.Conn, opts ...Option) (*Store, error) {
	if conn == nil {
		return nil, lease.Invalid("store", "nil *zk.Conn")
	}
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	if cfg.sessionTimeout <= 0 {
		return nil, lease.Invalid("session timeout", "New needs WithSessionTimeout (the negotiated session timeout of conn)")
	}
	if !cfg.aclSet {
		cfg.acl = zk.WorldACL(zk.PermAll)
	}
	return newStore(conn, false, cfg, cfg.sessionTimeout), nil
}

// configure applies opts. The default ACL (cfg.acl nil, aclSet false) is
// left to New and Dial.
func configure(opts []Option) (config, error) {
	cfg := config{root: DefaultRoot, maxWaiters: lease.DefaultMaxWaiters}
	for _, o := range opts {
		if o == nil {
			return cfg, lease.Invalid("option", "nil option")
		}
		o(&cfg)
	}
	if err := validRoot(cfg.root); err != nil {
		return cfg, err
	}
	if cfg.aclSet && len(cfg.acl) == 0 {
		return cfg, lease.Invalid("acl", "empty ACL")
	}
	if err := lease.CheckMaxWaiters(cfg.maxWaiters); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// ErrOpenRoot is returned by Dial when the Store has credentials (WithAuth,
// no WithACL) and its root already exists with an ACL that lets anyone do
// more than read it. Anyone could then create a key's node before the Store
// does, with an ACL of their own, and list (the node names hold the
// tokens) and delete the holder nodes under it. The error also matches
// lease.ErrInvalid.
var ErrOpenRoot = errors.New("zklease: root open to anyone")

// checkRoot refuses a root whose ACL grants world:anyone more than read.
// A missing root is fine (the Store creates it with its own ACL), and so
// is one we may not read the ACL of (then world:anyone has neither read
// nor admin permission on it).
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
				"%s grants world:anyone %q, more than read: anyone could take over the store's keys "+
					"despite its creator ACL; restrict the root (setAcl) or use another one", root, perms(a.Perms)))
		}
	}
	return nil
}

// perms spells ACL permissions as ZooKeeper's shell does ("cdrwa").
func perms(p int32) string {
	var b strings.Builder
	for i, bit := range []int32{zk.PermCreate, zk.PermDelete, zk.PermRead, zk.PermWrite, zk.PermAdmin} {
		if p&bit != 0 {
			b.WriteByte("cdrwa"[i])
		}
	}
	return b.String()
}

func validRoot(root string) error {
	if !strings.HasPrefix(root, "/") || root == "/" || strings.HasSuffix(root, "/") {
		return lease.Invalid("root", "%q is not an absolute znode path below /", root)
	}
	for _, seg := range strings.Split(root[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return lease.Invalid("root", "%q has an empty, \".\" or \"..\" segment", root)
		}
	}
	if root == "/zookeeper" || strings.HasPrefix(root, "/zookeeper/") {
		return lease.Invalid("root", "%q is reserved by ZooKeeper", root)
	}
	return nil
}

func newStore(conn *zk.Conn, own bool, cfg config, maxTTL time.Duration) *Store {
	return &Store{
		conn: conn, own: own, root: cfg.root, acl: cfg.acl, maxTTL: maxTTL,
		grants:   make(map[string]*grant),
		handoffs: make(map[string]handoff),
		handed:   make(map[string]string),
		subs:     make(map[*subscription]struct{}),

		maxWaiters: cfg.maxWaiters,
	}
}

// Dial connects to servers (host:port) asking for sessionTimeout, waits
// until the session is established (or ctx ends) and returns a Store that
// owns the connection: Close closes it, which ends the session and frees
// its leases at once.
//
// With WithAuth and no WithACL, the Store creates every node with the
// creator ACL, zk.AuthACL(zk.PermAll): the identities the connection
// authenticated as, and no one else, may read, change or delete them, or
// create beside them. Dial then also reads the root's ACL and refuses a root
// that already exists and lets anyone do more than read it (ErrOpenRoot).
//
// The server clamps the session timeout to [minSessionTimeout,
// maxSessionTimeout], by default [2, 20] × tickTime; the negotiated value is
// the Store's maximum TTL (Limits). Dial watches the session: when it
// expires, the Lost channel of every grant made in it is closed and the
// Client reports those leases lost at once; the connection then continues
// with a new session.
func Dial(ctx context.Context, servers []string, sessionTimeout time.Duration, opts ...Option) (*Store, error) {
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	if len(servers) == 0 {
		return nil, lease.Invalid("servers", "empty server list")
	}
	if sessionTimeout <= 0 {
		return nil, lease.Invalid("session timeout", "%v is not positive", sessionTimeout)
	}
	w := &watcher{ready: make(chan struct{}), log: cfg.logger}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	dialer := cfg.dialer
	if dialer == nil {
		dialer = net.DialTimeout
	}
	conn, _, err := zk.Connect(servers, sessionTimeout,
		zk.WithLogger(w), zk.WithLogInfo(true), zk.WithEventCallback(w.event), zk.WithDialer(dialer))
	if err != nil {
		return nil, fmt.Errorf("zklease: connect: %w", err)
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
		conn.Close()
		return nil, fmt.Errorf("zklease: no session with %s: %w", strings.Join(servers, ","), ctx.Err())
	}
	for _, a := range cfg.auth {
		if err := conn.AddAuth(a.scheme, a.auth); err != nil {
			conn.Close()
			return nil, fmt.Errorf("zklease: add auth %q: %w", a.scheme, err)
		}
	}
	if !cfg.aclSet {
		cfg.acl = zk.WorldACL(zk.PermAll)
		if len(cfg.auth) > 0 {
			cfg.acl = zk.AuthACL(zk.PermAll)
			err := ctx.Err()
			if err == nil {
				err = checkRoot(conn, cfg.root)
			}
			if err != nil {
				conn.Close()
				return nil, err
			}
		}
	}
	w.mu.Lock()
	s := newStore(conn, true, cfg, w.negotiated)
	s.tracked = true
	s.lost = make(chan struct{})
	w.store = s
	w.mu.Unlock()
	return s, nil
}

// watcher receives the library's log messages and session events for a
// Store made by Dial (on the library's goroutines; it never blocks).
type watcher struct {
	log   *slog.Logger
	ready chan struct{} // closed when the first session is established

	mu         sync.Mutex
	negotiated time.Duration
	store      *Store
}

// authenticatedFormat is the message go-zookeeper logs after each session
// handshake; its arguments are the only place v1.0.4 reveals the negotiated
// session timeout (id int64, timeout int32 in ms).
const authenticatedFormat = "authenticated: id=%d, timeout=%d"

// Printf implements zk.Logger.
func (w *watcher) Printf(format string, args ...any) {
	if format == authenticatedFormat && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			w.mu.Lock()
			first := w.negotiated == 0
			if first {
				w.negotiated = time.Duration(ms) * time.Millisecond
			}
			w.mu.Unlock()
			if first {
				close(w.ready)
			}
		}
	}
	w.log.Debug(fmt.Sprintf(format, args...), "component", "zk")
}

// event is the connection's event callback, called by the library's
// receiving goroutine for session events and for every watch event (before
// the watch's own channel gets it).
func (w *watcher) event(ev zk.Event) {
	w.mu.Lock()
	s := w.store
	w.mu.Unlock()
	switch {
	case s == nil:
	case ev.Type == zk.EventSession && ev.State == zk.StateExpired:
		s.sessionEnded()
	case ev.Type == zk.EventNodeDeleted:
		s.nodeDeleted(ev.Path) // before the waiter is woken
		s.watchFired(ev.Path)
	}
}

// sessionEnded closes the Lost channel of the grants of the ended session
// and starts a new one for later grants.
func (s *Store) sessionEnded() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != nil {
		close(s.lost)
		s.lost = nil
	}
	if !s.closed {
		s.lost = make(chan struct{})
	}
	clear(s.grants) // their ephemeral nodes are gone
	clear(s.handoffs)
	clear(s.handed)
	for sub := range s.subs {
		sub.sessionEnded()
	}
}

// lostChan returns the Lost channel for a grant made now (nil when the
// store cannot see session events).
func (s *Store) lostChan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		return nil
	}
	return s.lost
}

// Conn returns the ZooKeeper connection the Store uses.
func (s *Store) Conn() *zk.Conn { return s.conn }

// Root returns the znode under which the Store keeps its keys.
func (s *Store) Root() string { return s.root }

// Limits implements lease.Limiter: the TTL cannot exceed the session
// timeout (see WithSessionTimeout and Dial).
func (s *Store) Limits() lease.Limits { return lease.Limits{MaxTTL: s.maxTTL} }

// Close ends the Store's subscriptions and, for a Store made by Dial, closes
// the connection (ending the session deletes its holder nodes) and closes
// the Lost channels of its grants. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	subs := s.subs
	s.subs = make(map[*subscription]struct{})
	s.mu.Unlock()
	for sub := range subs {
		_ = sub.Close()
	}
	if s.own {
		s.conn.Close()
		s.mu.Lock()
		if s.lost != nil {
			close(s.lost)
			s.lost = nil
		}
		s.mu.Unlock()
	}
	return nil
}

var errClosed = errors.New("zklease: store closed")

// check validates r and reports whether the store is usable.
func (s *Store) check(ctx context.Context, r lease.Request, needTTL bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.Key == "" {
		return lease.Invalid("key", "empty")
	}
	if !validToken(r.Token) {
		return lease.Invalid("token", "must be 1 to 64 ASCII letters and digits")
	}
	if needTTL {
		if r.TTL < time.Millisecond {
			return lease.Invalid("ttl", "%v is below 1ms", r.TTL)
		}
		if r.TTL > s.maxTTL {
			return lease.Invalid("ttl", "%v is above the session timeout %v", r.TTL, s.maxTTL)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	return nil
}

// parent is the znode of key.
func (s *Store) parent(key string) string { return s.root + "/" + escapeKey(key) }

// remember records a node this store wrote last with stat st: the holder's,
// or a queued waiter's when waiting is set.
func (s *Store) remember(r lease.Request, g grant) {
	g.key, g.ttlMs = r.Key, r.TTL.Milliseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants[r.Token] = &g
}

// remembered returns a copy of what the store knows of r's holder node.
func (s *Store) remembered(r lease.Request) (grant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.grants[r.Token]
	if !ok || g.key != r.Key {
		return grant{}, false
	}
	return *g, true
}

func (s *Store) forget(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.handed, token)
	delete(s.grants, token)
}

// ensureParent creates key's parent, a container node (the server deletes
// it once it is empty again), and the root (persistent) if it is missing.
func (s *Store) ensureParent(parent string) error {
	_, err := s.conn.CreateContainer(parent, nil, zk.FlagContainer, s.acl)
	if errors.Is(err, zk.ErrNoNode) {
		p := ""
		for _, seg := range strings.Split(s.root[1:], "/") {
			p += "/" + seg
			if _, err := s.conn.Create(p, nil, zk.FlagPersistent, s.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return fmt.Errorf("zklease: create %s: %w", p, err)
			}
		}
		_, err = s.conn.CreateContainer(parent, nil, zk.FlagContainer, s.acl)
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("zklease: create %s: %w", parent, err)
	}
	return nil
}
