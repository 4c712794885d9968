// Store: construction, Migrate, limits, input validation and the dispatch of
// each operation to table mode (table.go) or advisory mode (advisory.go).

package pglease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
)

// MaxKeyLen is the longest lease key, in bytes, the store accepts.
const MaxKeyLen = lease.MaxKeyLen

// MinTTL is the shortest TTL the store accepts: expiries are kept in
// microseconds (table mode) and idle_session_timeout in milliseconds
// (advisory mode).
const MinTTL = time.Millisecond

// MaxAdvisoryTTL is the longest TTL in advisory mode: idle_session_timeout
// is a 32-bit number of milliseconds.
const MaxAdvisoryTTL = (1<<31 - 1) * time.Millisecond

var (
	_ lease.Store        = (*Store)(nil)
	_ lease.BatchRenewer = (*Store)(nil)
	_ lease.Notifier     = (*Store)(nil)
	_ lease.Limiter      = (*Store)(nil)
	_ lease.Queuer       = (*Store)(nil)
)

// Store keeps leases in PostgreSQL through a pgx pool. It is safe for
// concurrent use and runs no goroutines. It does not own the pool: Close
// frees only what the store took out of it (advisory-mode connections).
type Store struct {
	pool       *pgxpool.Pool
	mode       Mode
	ns         string
	table      string // the quoted, possibly schema-qualified table name
	queue      string // the quoted queue table of waiters, beside table
	queueIndex string // the queue table's index, unquoted (Migrate)
	channel    string // the quoted NOTIFY channel of (table, ns)
	chanRaw    string // the channel name unquoted
	classID    int32  // advisory mode: the namespace half of the lock key
	q          queries
	// listening counts open subscriptions: table-mode queue entries then
	// ask to be handed the key.
	listening atomic.Int32

	// maxWaiters caps each key's queue (WithMaxWaiters).
	maxWaiters int

	// Advisory mode: the sessions holding leases, by TTL in ms; the leases
	// held through them, by token and key; idle connections.
	mu       sync.Mutex
	sessions map[int64]*session
	held     map[string]*heldLease
	idle     []*pgx.Conn
	maxIdle  int
	closed   bool
}

// New returns a Store over pool. The table must exist: call [Store.Migrate]
// once (at deployment or start-up); New does not touch the database.
func New(pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("pglease: %w", lease.Invalid("store", "nil pool"))
	}
	c := config{table: DefaultTable, maxIdle: 4, maxWaiters: lease.DefaultMaxWaiters}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	ident, err := parseTable(c.table)
	if err != nil {
		return nil, fmt.Errorf("pglease: %w", err)
	}
	if c.mode != ModeTable && c.mode != ModeAdvisory {
		return nil, fmt.Errorf("pglease: %w", lease.Invalid("mode", "unknown mode %d", int(c.mode)))
	}
	if err := validText("namespace", c.ns); err != nil {
		return nil, fmt.Errorf("pglease: %w", err)
	}
	if c.maxIdle < 0 {
		return nil, fmt.Errorf("pglease: %w", lease.Invalid("max idle conns", "%d is negative", c.maxIdle))
	}
	if err := lease.CheckMaxWaiters(c.maxWaiters); err != nil {
		return nil, fmt.Errorf("pglease: %w", err)
	}
	table := ident.Sanitize()
	queue, index, indexName := queueNames(ident)
	sum := sha256.Sum256([]byte(strings.Join(ident, ".") + "\x00" + c.ns))
	chanRaw := "leasekit_" + hex.EncodeToString(sum[:12])
	s := &Store{
		pool:       pool,
		mode:       c.mode,
		ns:         c.ns,
		table:      table,
		queue:      queue,
		queueIndex: indexName,
		channel:    pgx.Identifier{chanRaw}.Sanitize(),
		chanRaw:    chanRaw,
		classID:    hash32(strings.Join(ident, ".") + "\x00" + c.ns),
		q:          buildQueries(table, queue, index, c.maxWaiters),
		sessions:   make(map[int64]*session),
		held:       make(map[string]*heldLease),
		maxIdle:    c.maxIdle,
	}
	s.maxWaiters = c.maxWaiters
	return s, nil
}

// Mode returns the store's mode.
func (s *Store) Mode() Mode { return s.mode }

// Namespace returns the store's namespace.
func (s *Store) Namespace() string { return s.ns }

// Table returns the quoted, possibly schema-qualified, lease table name.
func (s *Store) Table() string { return s.table }

// QueueTable returns the quoted, possibly schema-qualified, name of the
// table of queued waiters that Migrate creates beside the lease table: the
// lease table's name with "_queue" appended (shortened with a hash when that
// would pass PostgreSQL's 63-byte limit).
func (s *Store) QueueTable() string { return s.queue }

// QueuesWaiters reports true: the store hands a freed key to the waiter that
// has waited longest (see lease.Queuer and the package documentation).
func (s *Store) QueuesWaiters() bool { return true }

// Channel returns the (unquoted) NOTIFY channel on which the store announces
// releases: one per table and namespace; the payload is the token of the
// first live waiter ("" if none), a space and its fence when the release
// handed it the key, a newline and the key.
func (s *Store) Channel() string { return s.chanRaw }

// Limits reports the store's limits: keys of at most MaxKeyLen bytes, a TTL
// of at least MinTTL and, in advisory mode, at most MaxAdvisoryTTL.
func (s *Store) Limits() lease.Limits {
	l := lease.Limits{MinTTL: MinTTL, MaxKeyLen: MaxKeyLen}
	if s.mode == ModeAdvisory {
		l.MaxTTL = MaxAdvisoryTTL
	}
	return l
}

// Migrate creates the lease table and, beside it, the table of queued
// waiters (see [Store.QueueTable]) and its index, each if it does not exist:
// it is idempotent, safe to run concurrently, and upgrades a database made
// by an earlier version (which had only the lease table). On a migrated
// database it only reads the catalog, so it never waits for (nor stalls
// behind) transactions using the tables. The schema of a schema-qualified
// name must exist.
func (s *Store) Migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pglease: migrate %s: %w", s.table, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// Concurrent CREATE TABLE IF NOT EXISTS can fail on the catalog's unique
	// indexes: serialise migrations of the same table.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", migrateClass, hash32(s.table)); err != nil {
		return fmt.Errorf("pglease: migrate %s: %w", s.table, err)
	}
	for _, stmt := range []string{s.q.create, s.q.createQueue} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("pglease: migrate %s: %w", s.table, err)
		}
	}
	// CREATE INDEX IF NOT EXISTS locks the queue table before it finds the
	// index: behind any open transaction that wrote to the queue, it would
	// stall every lease operation of the table. Look in the catalog first.
	var indexed bool
	if err := tx.QueryRow(ctx, queueIndexedSQL, s.queue, s.queueIndex).Scan(&indexed); err != nil {
		return fmt.Errorf("pglease: migrate %s: %w", s.table, err)
	}
	if !indexed {
		if _, err := tx.Exec(ctx, s.q.createQueueIndex); err != nil {
			return fmt.Errorf("pglease: migrate %s: %w", s.table, err)
		}
	}
	var cols int
	if err := tx.QueryRow(ctx, queueColumnsSQL, s.queue).Scan(&cols); err != nil {
		return fmt.Errorf("pglease: migrate %s: %w", s.table, err)
	}
	if cols < 2 {
		if _, err := tx.Exec(ctx, s.q.addQueueColumns); err != nil {
			return fmt.Errorf("pglease: migrate %s: %w", s.table, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pglease: migrate %s: %w", s.table, err)
	}
	return nil
}

// migrateClass is the advisory lock namespace of Migrate ("lkmg").
const migrateClass int32 = 0x6c6b6d67

// Close frees the store's own resources: in advisory mode it closes the
// connections it keeps (which frees the locks of leases still held, so a
// Client using the store should be closed first), cutting any statement
// running on them. The pool stays open.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := s.idle
	s.idle = nil
	var sessions []*session
	for ttl, sess := range s.sessions {
		sess.dead = true
		sessions = append(sessions, sess)
		delete(s.sessions, ttl)
	}
	clear(s.held)
	s.mu.Unlock()
	for _, c := range conns {
		closeConn(c)
	}
	for _, sess := range sessions {
		if !sess.mu.TryLock() {
			// A statement is running on it: cut the connection under it
			// (the statement fails at once), then close what is left.
			_ = sess.conn.PgConn().Conn().Close()
			sess.mu.Lock()
		}
		closeConn(sess.conn)
		sess.mu.Unlock()
	}
	return nil
}

// Acquire takes r.Key for r.Token for r.TTL if it is free or expired and no
// live waiter is queued ahead of r.Token, refreshes the TTL if r.Token
// already holds it, and otherwise returns a *lease.HeldError (whose Queued
// counts the waiters ahead); with r.Queue it then queues r.Token, or
// refreshes its place in the queue, for r.TTL (see lease.Queuer).
func (s *Store) Acquire(ctx context.Context, r lease.Request) (lease.Grant, error) {
	if err := validate(r, true); err != nil {
		return lease.Grant{}, fmt.Errorf("pglease: acquire %q: %w", r.Key, err)
	}
	if err := lease.CheckHolder(r.Holder); err != nil {
		return lease.Grant{}, fmt.Errorf("pglease: acquire %q: %w", r.Key, err)
	}
	var (
		g   lease.Grant
		err error
	)
	if s.mode == ModeAdvisory {
		g, err = s.advAcquire(ctx, r)
	} else {
		g, err = s.tabAcquire(ctx, r)
	}
	var held *lease.HeldError
	if errors.As(err, &held) {
		// A refusal, not a failure: returned as every store returns it, so
		// that it reads the same whatever the store.
		return lease.Grant{}, held
	}
	if err != nil {
		return lease.Grant{}, fmt.Errorf("pglease: acquire %q: %w", r.Key, err)
	}
	return g, nil
}

// Renew extends r.Key to r.TTL from now if r.Token still holds it, and
// otherwise returns an error wrapping lease.ErrNotHeld.
func (s *Store) Renew(ctx context.Context, r lease.Request) error {
	if err := validate(r, true); err != nil {
		return fmt.Errorf("pglease: renew %q: %w", r.Key, err)
	}
	var err error
	if s.mode == ModeAdvisory {
		err = s.advRenew(ctx, r)
	} else {
		err = s.tabRenew(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("pglease: renew %q: %w", r.Key, err)
	}
	return nil
}

// Release frees r.Key if r.Token holds it and announces the release on the
// store's channel; otherwise it returns an error wrapping lease.ErrNotHeld.
// The key's row, with its fence, is kept. It also takes r.Token out of the
// key's queue of waiters (a waiter giving up), announcing the key if it is
// free so that the next waiter looks again.
func (s *Store) Release(ctx context.Context, r lease.Request) error {
	if err := validate(r, false); err != nil {
		return fmt.Errorf("pglease: release %q: %w", r.Key, err)
	}
	var err error
	if s.mode == ModeAdvisory {
		err = s.advRelease(ctx, r)
	} else {
		err = s.tabRelease(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("pglease: release %q: %w", r.Key, err)
	}
	return nil
}

// Inspect reports who holds key. For a free key, Info.Fence is the last
// fence granted for it.
func (s *Store) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if err := validKey(key); err != nil {
		return lease.Info{}, fmt.Errorf("pglease: inspect %q: %w", key, err)
	}
	q := s.q.tabInspect
	args := []any{s.ns, key}
	if s.mode == ModeAdvisory {
		q = s.q.advInspect
		args = append(args, s.classID, hash32(key))
	}
	var (
		info      = lease.Info{Key: key}
		fence, us int64
	)
	err := s.pool.QueryRow(ctx, q, args...).Scan(&info.Held, &info.Holder, &fence, &us)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return info, nil
	case err != nil:
		return lease.Info{}, fmt.Errorf("pglease: inspect %q: %w", key, err)
	}
	info.Fence = uint64(fence)
	if info.Held {
		info.Remaining = time.Duration(us) * time.Microsecond
	} else {
		info.Holder = ""
	}
	return info, nil
}

// RenewMany renews every request: in table mode in one statement, in
// advisory mode one statement per session (one per TTL in use).
// It returns one error per request, in order, meaning what Renew's would.
func (s *Store) RenewMany(ctx context.Context, rs []lease.Request) []error {
	errs := make([]error, len(rs))
	idx := make([]int, 0, len(rs))
	for i, r := range rs {
		if err := validate(r, true); err != nil {
			errs[i] = fmt.Errorf("pglease: renew %q: %w", r.Key, err)
			continue
		}
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return errs
	}
	if s.mode == ModeAdvisory {
		s.advRenewMany(ctx, rs, idx, errs)
		return errs
	}
	s.tabRenewMany(ctx, rs, idx, errs)
	return errs
}

func validKey(key string) error {
	switch {
	case key == "":
		return lease.Invalid("key", "empty")
	case len(key) > MaxKeyLen:
		return lease.Invalid("key", "%d bytes, longer than the limit of %d", len(key), MaxKeyLen)
	}
	return validText("key", key)
}

// validText rejects what a PostgreSQL text value cannot hold.
func validText(field, v string) error {
	if !utf8.ValidString(v) {
		return lease.Invalid(field, "not valid UTF-8")
	}
	if strings.IndexByte(v, 0) >= 0 {
		return lease.Invalid(field, "contains a NUL byte")
	}
	return nil
}

func validate(r lease.Request, needTTL bool) error {
	if err := validKey(r.Key); err != nil {
		return err
	}
	if r.Token == "" {
		return lease.Invalid("token", "empty")
	}
	if err := validText("token", r.Token); err != nil {
		return err
	}
	if err := validText("holder", r.Holder); err != nil {
		return err
	}
	if needTTL && r.TTL < MinTTL {
		return lease.Invalid("ttl", "%v is below the minimum %v", r.TTL, MinTTL)
	}
	return nil
}

// micros rounds d up to whole microseconds.
func micros(d time.Duration) float64 {
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return float64(us)
}

// queueNames returns the quoted queue table beside the lease table ident,
// and the name of its index (in the same schema), quoted and not.
func queueNames(ident pgx.Identifier) (queue, index, indexName string) {
	base := ident[len(ident)-1]
	q := append(pgx.Identifier{}, ident...)
	q[len(q)-1] = derivedName(base, "_queue")
	indexName = derivedName(base, "_queue_expiry")
	return q.Sanitize(), pgx.Identifier{indexName}.Sanitize(), indexName
}

// derivedName is base+suffix, or, when that would pass PostgreSQL's
// identifier limit, base cut (at a character boundary) and followed by a
// hash of the whole base, then suffix.
func derivedName(base, suffix string) string {
	if len(base)+len(suffix) <= maxIdentLen {
		return base + suffix
	}
	tag := fmt.Sprintf("_%08x", uint32(hash32(base)))
	cut := maxIdentLen - len(suffix) - len(tag)
	for cut > 0 && !utf8.RuneStart(base[cut]) {
		cut--
	}
	return base[:cut] + tag + suffix
}

// hash32 is the 32-bit FNV-1a hash of s, as an int4 for pg_advisory_lock.
func hash32(s string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return int32(h.Sum32())
}
