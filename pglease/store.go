// What both stores share: New, Migrate, the queue's SQL, Inspect, FencedTx, LISTEN.

package pglease

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Store is what both PostgreSQL stores, [TableStore] and [AdvisoryStore],
// offer: a [driver.Store] with batched renewals and release announcements,
// the schema (Migrate) and fenced writes.
type Store interface {
	driver.Store
	driver.BatchRenewer
	driver.Notifier
	driver.Lister
	driver.Breaker
	// Migrate creates the tables if they do not exist (see the package doc).
	Migrate(ctx context.Context) error
	// FencedTx runs fn in a transaction that first checks that l still
	// holds its key (see the package doc).
	FencedTx(ctx context.Context, l LeaseRef, fn func(ctx context.Context, tx pgx.Tx) error) error
	// Namespace returns the store's namespace.
	Namespace() string
	// Table returns the quoted, possibly schema-qualified, lease table.
	Table() string
	// QueueTable returns the quoted table of queued waiters beside Table.
	QueueTable() string
	// Channel returns the unquoted NOTIFY channel of the store's releases.
	Channel() string
}

// New returns a [TableStore], or an [AdvisoryStore] WithMode(ModeAdvisory).
// New does not touch the database: call Migrate once.
func New(pool *pgxpool.Pool, opts ...Option) (Store, error) {
	c, err := newConfig(opts)
	switch {
	case err != nil:
		return nil, err
	case pool == nil:
		return nil, fmt.Errorf("pglease: %w", lease.Invalid("store", "nil pool"))
	case c.mode == ModeAdvisory:
		return newAdvisory(pool, c), nil
	}
	return newTable(pool, c), nil
}

// LeaseRef identifies a held lease; *lease.Lease implements it.
type LeaseRef interface {
	Key() string
	Token() string
	Fence() uint64
}

// base is the connection code both stores share.
type base struct {
	config
	pool                 *pgxpool.Pool
	sql                  func(string) string // fills in the table names (T, Q) and the queue cap
	inspectSQL, fenceSQL string              // $1 ns, $2 key (, $3 token), then lockArgs
	lockArgs             func(key string) []any
	maxTTL               time.Duration
	list                 listStatements
}

// newBase returns the base of a store whose lease in row c is live when
// live(i) is true, $i being the first of the key's lockArgs. Its sql fills
// in SHARED, whether a queued request is shared, as false unless a
// statement did.
func newBase(pool *pgxpool.Pool, n config, live func(i int) string) base {
	r := strings.NewReplacer(" T ", " "+n.table+" ", " Q ", " "+n.queue+" ", " I ", " "+n.index+" ",
		"MAXW", strconv.Itoa(n.maxWaiters), "SHARED", "false")
	b := base{config: n, pool: pool, sql: r.Replace, lockArgs: func(string) []any { return nil }}
	b.inspectSQL = b.sql(`SELECT ` + live(3) + `, c.holder, c.fence, ` + remaining + ` FROM T c WHERE c.ns = $1 AND c.key = $2`)
	b.fenceSQL = b.sql(`SELECT c.fence FROM T c WHERE c.ns = $1 AND c.key = $2 AND c.token = $3 AND ` + live(4) + ` FOR SHARE OF c`)
	b.list = newListStatements(b)
	return b
}

// Namespace returns the store's namespace.
func (b *base) Namespace() string { return b.ns }

// Table returns the quoted, possibly schema-qualified lease table.
func (b *base) Table() string { return b.table }

// QueueTable returns the quoted queue table: Table's name + "_queue" (hashed past 63 bytes).
func (b *base) QueueTable() string { return b.queue }

// Channel returns the unquoted NOTIFY channel of the table and namespace.
func (b *base) Channel() string { return b.channelName }

// Caps reports a FIFO store with the Client's limits (and MaxAdvisoryTTL).
func (b *base) Caps() driver.Caps {
	return driver.Caps{FIFO: true, MaxWaiters: b.maxWaiters, MaxTTL: b.maxTTL, FixedTTL: b.maxTTL > 0}
}

const schemaSQL = `CREATE TABLE IF NOT EXISTS T (
	ns text NOT NULL, key text NOT NULL, token text, holder text NOT NULL DEFAULT '',
	fence bigint NOT NULL, expires_at timestamptz, pid integer, readers jsonb, broken jsonb, PRIMARY KEY (ns, key))
	WITH (fillfactor = 50)`

// fillfactorSQL leaves half of each page of a lease table made before
// schemaSQL had it free, for renewals as heap-only updates (docs/stores.md).
const fillfactorSQL = `ALTER TABLE T SET (fillfactor = 50)`

const queueSchemaSQL = `CREATE TABLE IF NOT EXISTS Q (
	ns text NOT NULL, key text NOT NULL, token text NOT NULL, seq bigserial NOT NULL,
	expires_at timestamptz NOT NULL, shared boolean NOT NULL DEFAULT false, PRIMARY KEY (ns, key, token))`

// migratedSQL reports whether the queue table $1 has the index named $2,
// the lease table $3 the index named $4, and the tables the columns added
// since their first version (the lease table's readers and broken, the
// queue's shared); then whether the lease table has a fillfactor (any: one
// the operator chose is kept). It reads the catalog alone: CREATE INDEX IF
// NOT EXISTS or ALTER TABLE would lock the table first, behind any open
// transaction that wrote to it.
const migratedSQL = `SELECT (SELECT count(*) = 2 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE (i.indrelid, c.relname) IN (($1::regclass, $2), ($3::regclass, $4))) AND (SELECT count(*) = 3 FROM pg_attribute
WHERE NOT attisdropped AND (attrelid, attname) IN (($1::regclass, 'shared'), ($3::regclass, 'readers'), ($3::regclass, 'broken'))),
EXISTS (SELECT FROM pg_class, unnest(reloptions) o WHERE oid = $3::regclass AND o LIKE 'fillfactor=%')`

// Migrate creates the lease table, the queue table beside it and their
// indexes, each if missing, and adds the columns of shared holds and
// tombstones to tables made before them. It is idempotent and safe to run
// concurrently; on a migrated database it only reads the catalog.
func (b *base) Migrate(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		// Concurrent CREATE TABLE IF NOT EXISTS can fail on the catalog's
		// unique indexes: serialise migrations of the same table ("lkmg").
		var migrated, filled bool
		batch := &pgx.Batch{}
		batch.Queue("SELECT pg_advisory_xact_lock($1, $2)", int32(0x6c6b6d67), hash32(b.table))
		batch.Queue(b.sql(schemaSQL))
		batch.Queue(b.sql(queueSchemaSQL))
		batch.Queue(migratedSQL, b.queue, b.indexName, b.table, b.keysName).QueryRow(func(row pgx.Row) error { return row.Scan(&migrated, &filled) })
		if err := tx.SendBatch(ctx, batch).Close(); err != nil || migrated && filled {
			return err
		}
		batch = &pgx.Batch{}
		if !migrated {
			batch.Queue(b.sql(`ALTER TABLE T ADD COLUMN IF NOT EXISTS readers jsonb`))
			batch.Queue(b.sql(`ALTER TABLE Q ADD COLUMN IF NOT EXISTS shared boolean NOT NULL DEFAULT false`))
			batch.Queue(b.sql(`CREATE INDEX IF NOT EXISTS I ON Q (ns, expires_at)`))
			batch.Queue(b.sql(`ALTER TABLE T ADD COLUMN IF NOT EXISTS broken jsonb`))
			batch.Queue(b.sql(`CREATE INDEX IF NOT EXISTS ` + pgx.Identifier{b.keysName}.Sanitize() + ` ON T (ns, key COLLATE "C")`))
		}
		if !filled {
			batch.Queue(b.sql(fillfactorSQL)) // new pages only: rewritten rows move to them
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return fmt.Errorf("pglease: migrate %s: %w", b.table, err)
	}
	return nil
}

// Acquire statements of both stores: $1 ns, $2 key, $3 token, $4 holder,
// $5 TTL in µs, $6 queue, $7 channel. liveQueue is the key's live queue q,
// in the statement's snapshot, and ah.n the live entries ahead of $3 (all
// of them if it is not queued).
const liveQueue = `q AS (
	SELECT token, seq, shared FROM Q WHERE ns = $1 AND key = $2 AND expires_at > clock_timestamp()
),
ah AS (
	SELECT count(*) AS n FROM q WHERE seq < COALESCE((SELECT seq FROM q WHERE token = $3), 9223372036854775807)
)`

// queueAfter is the queue's part of an acquire statement, after the CTE
// that grants (GRANTED: a boolean expression over it). enq queues $3 or
// refreshes its entry in place (an expired entry goes to the back) unless
// the queue is full, SHARED saying whether it is; deq takes a granted token out of the queue; gc deletes
// the key's expired entries without waiting for locked ones. wk: a queued
// waiter refused from a FREE key because others are ahead announces the key
// to the head, which a release may have missed (an entry that committed
// late, docs/design.md); the head is named only if it is exclusive.
const queueAfter = `enq AS (
	INSERT INTO Q AS e (ns, key, token, expires_at, shared)
	SELECT $1, $2, $3, clock_timestamp() + $5::float8 * interval '1 microsecond', SHARED WHERE $6::bool AND NOT GRANTED
		AND (EXISTS (SELECT 1 FROM q WHERE token = $3) OR (SELECT count(*) FROM q) < MAXW)
	ON CONFLICT (ns, key, token) DO UPDATE SET expires_at = excluded.expires_at, shared = excluded.shared,
		seq = CASE WHEN e.expires_at <= clock_timestamp() THEN excluded.seq ELSE e.seq END
	RETURNING 1
),
deq AS (DELETE FROM Q WHERE ns = $1 AND key = $2 AND token = $3 AND GRANTED RETURNING 1),
gc AS (
	DELETE FROM Q WHERE (ns, key, token) IN (SELECT ns, key, token FROM Q WHERE ns = $1 AND key = $2
		AND token <> $3 AND expires_at <= clock_timestamp() AND GRANTED IS NOT NULL FOR UPDATE SKIP LOCKED)
	RETURNING 1
),
wk AS (
	SELECT pg_notify($7, (SELECT CASE WHEN shared THEN '' ELSE token END FROM q ORDER BY seq LIMIT 1) || E'\n' || $2)
	WHERE (SELECT n FROM ah) > 0 AND EXISTS (SELECT 1 FROM q WHERE token = $3) AND NOT GRANTED AND FREE
)`

// releaseSQL frees the row of $1 ns, $2 key if $3 holds it and it is OWNED
// by the caller, keeping the fence; it takes $3 out of the queue, sweeps up
// to 8 expired entries of ns, and announces on $4 the key and its queue's
// head (if exclusive, else "") if released or if a waiter left a FREE key's queue. It commits without
// waiting for the WAL: one lost in a crash leaves the lease held until its TTL.
const releaseSQL = `WITH r AS (
	UPDATE T c SET token = NULL, holder = '', expires_at = NULL, pid = NULL
	WHERE c.ns = $1 AND c.key = $2 AND c.token = $3 AND OWNED
	RETURNING 1
),
d AS (DELETE FROM Q WHERE ns = $1 AND key = $2 AND token = $3 AND RELEASED IS NOT NULL RETURNING 1),
gc AS (
	DELETE FROM Q WHERE (ns, key, token) IN (SELECT ns, key, token FROM Q WHERE ns = $1
		AND expires_at <= clock_timestamp() AND RELEASED IS NOT NULL LIMIT 8 FOR UPDATE SKIP LOCKED)
	RETURNING 1
),
n AS (
	SELECT pg_notify($4, COALESCE((SELECT CASE WHEN shared THEN '' ELSE token END FROM Q WHERE ns = $1 AND key = $2
		AND token <> $3 AND expires_at > clock_timestamp() ORDER BY seq LIMIT 1), '') || E'\n' || $2)
	WHERE RELEASED OR (EXISTS (SELECT 1 FROM d) AND FREE)
)
SELECT RELEASED, (SELECT count(*) FROM n), set_config('synchronous_commit', 'off', true)`

// release is releaseSQL for a store: see there for owned and free.
func (b *base) release(owned, free string) string {
	return b.sql(fill(releaseSQL, "OWNED", owned, "FREE", free, "RELEASED", "EXISTS (SELECT 1 FROM r)"))
}

// remaining is the microseconds left before c.expires_at, by the server's clock.
const remaining = `COALESCE(GREATEST(floor(extract(epoch FROM c.expires_at - clock_timestamp()) * 1000000), 0), 0)::bigint`

// fill replaces the placeholders of a statement's fragment: kv are pairs.
func fill(frag string, kv ...string) string { return strings.NewReplacer(kv...).Replace(frag) }

// querier is a pgx pool or connection.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// acquired is an acquire statement's row.
type acquired struct {
	ok, live, ours, bad    bool
	fence, us, ahead, enqd int64
	holder                 string
	pid                    int32
}

// acquire runs an acquire statement for r on q. A queued attempt first
// takes r.Key's queue lock (pg_advisory_xact_lock, the one-bigint form) in
// the same batch, one round trip and one implicit transaction: queued
// attempts of a key then run one after the other, and each statement's
// snapshot counts every entry queued before, so the cap is exact.
func (b *base) acquire(ctx context.Context, q querier, r driver.Request, sql string, args ...any) (acquired, error) {
	var a acquired
	batch := &pgx.Batch{}
	b.queueAcquire(batch, r, sql, &a, args...)
	return a, q.SendBatch(ctx, batch).Close()
}

// queueAcquire adds acquire's statements for r to batch; a gets the row.
func (b *base) queueAcquire(batch *pgx.Batch, r driver.Request, sql string, a *acquired, args ...any) {
	args = append([]any{b.ns, r.Key, r.Token, r.Holder, micros(r.TTL), r.Queue, b.channelName}, args...)
	if r.Queue {
		h := fnv.New64a()
		_, _ = h.Write([]byte("leasekit queue\x00" + b.table + "\x00" + b.ns + "\x00" + r.Key))
		batch.Queue("SELECT pg_advisory_xact_lock($1)", int64(h.Sum64()))
	}
	batch.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		return row.Scan(&a.ok, &a.fence, &a.holder, &a.us, &a.live, &a.ahead, nil, &a.enqd, &a.pid, &a.ours, &a.bad)
	})
}

// badMsg describes a row that bad (table.go) finds.
const badMsg = "a token without an expiry, or readers that are no object of [expiry, holder] entries"

// result turns a, or the statement's err, into Acquire's outcome.
func (a acquired) result(r driver.Request, maxWaiters int, err error) (driver.Grant, error) {
	switch {
	case err != nil:
		return driver.Grant{}, fmt.Errorf("pglease: acquire %q: %w", r.Key, corrupt(err))
	case a.bad:
		return driver.Grant{}, fmt.Errorf("pglease: acquire %q: %w: %s", r.Key, lease.ErrCorrupt, badMsg)
	case a.fence <= 0 && (a.ok || a.ours || a.live):
		return driver.Grant{}, fmt.Errorf("pglease: acquire %q: %w: fence %d", r.Key, lease.ErrCorrupt, a.fence)
	case a.ok || a.ours:
		return driver.Grant{Fence: uint64(a.fence)}, nil
	case r.Queue && a.enqd == 0:
		return driver.Grant{}, &lease.QueueFullError{Key: r.Key, Max: maxWaiters}
	case !a.live:
		// Free but reserved for the waiters ahead, or taken by a statement
		// that committed after this one's snapshot.
		return driver.Grant{}, &lease.HeldError{Key: r.Key, Queued: int(a.ahead)}
	}
	return driver.Grant{}, &lease.HeldError{Key: r.Key, Holder: a.holder, Fence: uint64(a.fence),
		Remaining: time.Duration(a.us) * time.Microsecond, Queued: int(a.ahead)}
}

// renewSQL renews the leases ($2 keys, $3 tokens, $4 TTLs in µs) of ns $1
// whose rows match COND; it returns the renewed ones' positions in $2 (from
// 1) and fences, the process and EXTRA. Go puts each fence in its place: a
// join in SQL ran as a nested loop (O(n²), 30 s for 10,000 leases).
const renewSQL = `WITH u AS (
	UPDATE T AS l SET expires_at = clock_timestamp() + r.ttl * interval '1 microsecond'
	FROM unnest($2::text[], $3::text[], $4::float8[]) WITH ORDINALITY AS r(key, token, ttl, i)
	WHERE l.ns = $1 AND l.key = r.key AND l.token = r.token AND COND
	RETURNING r.i, l.fence
)
SELECT ARRAY(SELECT i FROM u ORDER BY i), ARRAY(SELECT fence FROM u ORDER BY i), pg_backend_pid(), EXTRA`

// renew runs a renewSQL statement for rs on q and returns each request's
// fence, 0 if it was not renewed.
func (b *base) renew(ctx context.Context, q querier, sql string, rs []driver.Request, extra ...any) (fences []int64, pid int32, err error) {
	keys, tokens, ttls := make([]string, len(rs)), make([]string, len(rs)), make([]float64, len(rs))
	for i, r := range rs {
		keys[i], tokens[i], ttls[i] = r.Key, r.Token, micros(r.TTL)
	}
	var at, got []int64
	err = q.QueryRow(ctx, sql, append([]any{b.ns, keys, tokens, ttls}, extra...)...).Scan(&at, &got, &pid, nil)
	fences = make([]int64, len(rs))
	for j := 0; err == nil && j < len(at); j++ {
		fences[at[j]-1] = max(got[j], 0) // a fence we did not write: not renewed
	}
	return fences, pid, corrupt(err)
}

// opErr is op's error on key: err, or lease.ErrNotHeld if !held.
func opErr(op, key string, held bool, err error) error {
	if err == nil && held {
		return nil
	} else if err == nil {
		err = lease.ErrNotHeld
	}
	return fmt.Errorf("pglease: %s %q: %w", op, key, corrupt(err))
}

// corrupt wraps lease.ErrCorrupt into err if it is about data we did not
// write: a data exception (SQLSTATE class 22: a number out of range, JSON of
// another shape) or a value that does not scan.
func corrupt(err error) error {
	var pe *pgconn.PgError
	var se pgx.ScanArgError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Code, "22") || errors.As(err, &se) {
		return fmt.Errorf("%w: %w", lease.ErrCorrupt, err)
	}
	return err
}

// Inspect reports who holds key; for a free key, Fence is the last granted.
func (b *base) Inspect(ctx context.Context, key string) (driver.Info, error) {
	info := driver.Info{Key: key}
	var fence, us int64
	err := b.pool.QueryRow(ctx, b.inspectSQL, append([]any{b.ns, key}, b.lockArgs(key)...)...).Scan(&info.Held, &info.Holder, &fence, &us)
	switch {
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return driver.Info{}, fmt.Errorf("pglease: inspect %q: %w", key, corrupt(err))
	case fence < 0 || info.Held && fence == 0:
		return driver.Info{}, fmt.Errorf("pglease: inspect %q: %w: fence %d", key, lease.ErrCorrupt, fence)
	case !info.Held: // a free key, or one never taken
		return driver.Info{Key: key, Fence: uint64(fence)}, nil
	}
	info.Fence, info.Remaining = uint64(fence), time.Duration(us)*time.Microsecond
	return info, nil
}

// FencedTx runs fn in a transaction that first checks, under a FOR SHARE row
// lock, that the row names l's token and fence and the lease is live (by the
// server's clock, or its session's lock): a holder paused past its TTL gets
// lease.ErrNotHeld, and no takeover completes before fn commits. The row
// lock also delays the holder's renewal: keep fn short.
func (b *base) FencedTx(ctx context.Context, l LeaseRef, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if l == nil || fn == nil {
		return fmt.Errorf("pglease: fenced write: %w", lease.Invalid("argument", "nil lease or function"))
	}
	var fence int64
	tx, err := b.pool.Begin(ctx)
	if err == nil {
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		err = tx.QueryRow(ctx, b.fenceSQL, append([]any{b.ns, l.Key(), l.Token()}, b.lockArgs(l.Key())...)...).Scan(&fence)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pglease: fenced write on %q rejected: %w", l.Key(), lease.ErrNotHeld)
	case err != nil:
		return fmt.Errorf("pglease: fenced write on %q: %w", l.Key(), err)
	case uint64(fence) != l.Fence():
		return fmt.Errorf("pglease: fenced write on %q rejected: fence %d, lease has %d: %w", l.Key(), fence, l.Fence(), lease.ErrNotHeld)
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pglease: fenced write on %q: commit: %w", l.Key(), err)
	}
	return nil
}

// Subscribe takes a connection out of the pool for good and LISTENs on the
// store's channel; it returns once the server has confirmed it. Closing the
// subscription closes the connection.
func (b *base) Subscribe(ctx context.Context) (driver.Subscription, error) {
	pc, err := b.pool.Acquire(ctx)
	if err == nil {
		conn := pc.Hijack()
		if _, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{b.channelName}.Sanitize()); err == nil {
			sctx, cancel := context.WithCancel(context.Background())
			return &subscription{conn: conn, ctx: sctx, cancel: cancel}, nil
		}
		closeConn(conn)
	}
	return nil, fmt.Errorf("pglease: subscribe %s: %w", b.channelName, err)
}

// subscription is a driver.Subscription over one LISTENing connection.
type subscription struct {
	mu     sync.Mutex // held by Next while it reads, and by Close
	conn   *pgx.Conn
	ctx    context.Context // ended by Close
	cancel context.CancelFunc
}

var errSubClosed = errors.New("pglease: subscription closed")

// Next returns the next announcement: the payload is the token of the head
// of the key's queue ("" if none), a newline and the key. It only wakes: a
// payload grants nothing, since any role may call pg_notify.
func (s *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.conn.WaitForNotification(ctx)
	switch {
	case err == nil:
	case s.ctx.Err() != nil:
		return driver.Announcement{}, errSubClosed
	case ctx.Err() != nil:
		return driver.Announcement{}, ctx.Err()
	default:
		return driver.Announcement{}, fmt.Errorf("pglease: subscription: %w", err)
	}
	if next, key, ok := strings.Cut(n.Payload, "\n"); ok {
		return driver.Announcement{Key: key, Next: next}, nil
	}
	return driver.Announcement{Key: n.Payload}, nil
}

// Close ends the subscription, unblocks Next and closes the connection.
func (s *subscription) Close() error {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	closeConn(s.conn)
	return nil
}

// closeConn closes conn (a Terminate message, then the socket).
func closeConn(conn *pgx.Conn) { _ = conn.Close(context.Background()) }

// micros rounds d up to whole microseconds.
func micros(d time.Duration) float64 { return float64((d + time.Microsecond - 1) / time.Microsecond) }
