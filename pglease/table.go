// TableStore: each lease is a row whose expiry the server's clock enforces;
// every operation is one statement on any pooled connection.

package pglease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// TableStore keeps each lease as a row of the lease table. It is safe for
// concurrent use and does not own the pool.
type TableStore struct {
	base
	acquireSQL, sharedSQL, renewSQL, releaseSQL, infoSQL string
	writersSQL                                           string // renewSQL for writers alone
}

// rowLive is true when the key's row c names a live holder: a writer's
// token, or the empty token for readers, whose last expiry is c.expires_at.
const rowLive = `(c.token IS NOT NULL AND c.expires_at > clock_timestamp())`

// Readers: a shared row's readers column maps each reader's token to
// [expiry in µs since the epoch, holder]. nowMicros is the server's clock
// in those µs; live(v) is true when the entry v has not expired.
const nowMicros = `(extract(epoch FROM clock_timestamp()) * 1000000)::int8`

func live(v string) string { return `(` + v + `->>0)::int8 > ` + nowMicros }

// bad(c) is true when row c holds what our statements never write: a token
// without an expiry, or readers (the empty token) that are no object of
// [expiry, holder] entries. Such a row is lease.ErrCorrupt, never granted,
// renewed or released.
func bad(c string) string {
	return fill(`(R.token IS NOT NULL AND (R.expires_at IS NULL OR R.token = '' AND NOT CASE WHEN jsonb_typeof(R.readers) = 'object'
	THEN R.readers <> '{}' AND NOT EXISTS (SELECT 1 FROM jsonb_each(R.readers) e WHERE jsonb_typeof(e.value) <> 'array'
		OR jsonb_typeof(e.value->0) IS DISTINCT FROM 'number' OR jsonb_typeof(e.value->1) IS DISTINCT FROM 'string') ELSE false END))`,
		"R.", c+".")
}

// readersSet assigns a row the readers (k, v) of from: the empty token (NULL if
// there is none), the last expiry and the holder of that reader.
func readersSet(from string) string {
	return `(token, readers, expires_at, holder) = (SELECT CASE WHEN count(*) > 0 THEN '' END, jsonb_object_agg(k, v),
		timestamptz 'epoch' + max((v->>0)::int8) * interval '1 microsecond', COALESCE((array_agg(v->>1 ORDER BY (v->>0)::int8 DESC))[1], '')
	FROM ` + from + `)`
}

// acquireTail ends both acquire statements: the queue (granted if acq or
// re, a holder's retry of the other kind, returned the fence) and the row
// of the outcome.
var acquireTail = `,
QUEUE
SELECT a.fence IS NOT NULL, COALESCE(a.fence, c.fence, 0), COALESCE(c.holder, ''), ` + remaining + `,
	COALESCE(` + rowLive + `, false), ah.n, (SELECT count(*) FROM wk), (SELECT count(*) FROM enq), pg_backend_pid(), false, ` + bad("c") + `
FROM ah LEFT JOIN (SELECT fence FROM acq UNION ALL SELECT fence FROM re) a ON true LEFT JOIN T c ON c.ns = $1 AND c.key = $2`

// granted is the queue's GRANTED in both acquire statements.
const granted = `(EXISTS (SELECT 1 FROM acq) OR EXISTS (SELECT 1 FROM re))`

// tableAcquire takes the row when it is ours and live, or free or expired
// with no live waiter ahead of us (ah); the fence grows unless it was ours.
// The upsert is not even tried (so it takes no row lock, and a refused
// attempt never waits for the holder's release) when the snapshot shows
// the key held by another live token (or readers), or reserved for waiters
// ahead. A live reader $3 is refreshed instead (re).
var tableAcquire = `WITH ` + liveQueue + `,
re AS (
	UPDATE T AS l SET ` + readersSet(`(SELECT k, CASE WHEN k = $3 THEN jsonb_build_array(`+nowMicros+` + $5::float8::int8, $4::text) ELSE v END
		FROM jsonb_each(l.readers) e(k, v) WHERE `+live("v")+`) x(k, v)`) + `
	WHERE l.ns = $1 AND l.key = $2 AND l.token = '' AND ` + live("l.readers->$3") + ` AND NOT ` + bad("l") + `
	RETURNING l.fence
),
acq AS (
	INSERT INTO T AS l (ns, key, token, holder, fence, expires_at)
	SELECT $1, $2, $3, $4, 1, clock_timestamp() + $5::float8 * interval '1 microsecond'
	WHERE NOT EXISTS (SELECT 1 FROM T c WHERE c.ns = $1 AND c.key = $2 AND c.token <> $3 AND ` + rowLive + `)
		AND ((SELECT n FROM ah) = 0 OR EXISTS (SELECT 1 FROM T x WHERE x.ns = $1 AND x.key = $2 AND x.token = $3))
	ON CONFLICT (ns, key) DO UPDATE SET
		token = excluded.token, holder = excluded.holder, expires_at = excluded.expires_at, readers = NULL,
		fence = CASE WHEN l.token = excluded.token THEN l.fence ELSE l.fence + 1 END
	WHERE NOT ` + bad("l") + ` AND ((l.token = excluded.token AND l.expires_at > clock_timestamp())
		OR ((l.token IS NULL OR l.expires_at <= clock_timestamp()) AND (SELECT n FROM ah) = 0))
	RETURNING l.fence
)` + acquireTail

// sharedAcquire adds $3 to the row's live readers unless a live writer
// holds it or (ax) a live exclusive waiter is queued ahead of $3; a reader
// already there is refreshed, and so is a live writer $3 (re). The fence
// grows unless live readers held.
var sharedAcquire = `WITH ` + liveQueue + `,
re AS (
	UPDATE T AS l SET holder = $4, expires_at = clock_timestamp() + $5::float8 * interval '1 microsecond'
	WHERE l.ns = $1 AND l.key = $2 AND l.token = $3 AND l.expires_at > clock_timestamp()
	RETURNING l.fence
),
ax AS (SELECT count(*) AS n FROM q WHERE NOT shared AND seq < COALESCE((SELECT seq FROM q WHERE token = $3), 9223372036854775807)),
acq AS (
	INSERT INTO T AS l (ns, key, token, holder, fence, expires_at, readers)
	SELECT $1, $2, '', $4, 1, timestamptz 'epoch' + e * interval '1 microsecond', jsonb_build_object($3::text, jsonb_build_array(e, $4::text))
	FROM (SELECT ` + nowMicros + ` + $5::float8::int8 AS e) n
	WHERE NOT EXISTS (SELECT 1 FROM T c WHERE c.ns = $1 AND c.key = $2 AND c.token <> '' AND ` + rowLive + `)
		AND ((SELECT n FROM ax) = 0 OR EXISTS (SELECT 1 FROM T x WHERE x.ns = $1 AND x.key = $2 AND ` + live("x.readers->$3") + `))
	ON CONFLICT (ns, key) DO UPDATE SET
		fence = CASE WHEN l.token = '' AND l.expires_at > clock_timestamp() THEN l.fence ELSE l.fence + 1 END,
		` + readersSet(`(SELECT k, v FROM jsonb_each(l.readers) e(k, v) WHERE k <> $3 AND `+live("v")+`
			UNION ALL SELECT $3, excluded.readers->$3) x(k, v)`) + `
	WHERE (l.token IS NULL OR l.token = '' OR l.expires_at <= clock_timestamp()) AND NOT ` + bad("l") + `
		AND ((SELECT n FROM ax) = 0 OR ` + live("l.readers->$3") + `)
	RETURNING l.fence
)` + acquireTail

// tableRenew renews the leases ($2 keys, $3 tokens, $4 TTLs in µs) of ns
// $1, writers' and readers' alike, as renewSQL does: a key's readers
// together, by one update of its row that also drops its expired readers,
// the readers' rows locked in key order first (lk), as other clients
// renewing readers of the same keys do, against deadlocks (a writer's row
// is renewed by its holder alone).
var tableRenew = `WITH r AS (
	SELECT * FROM unnest($2::text[], $3::text[], $4::float8[]) WITH ORDINALITY AS r(key, token, ttl, i)
),
u AS (
	UPDATE T AS l SET expires_at = clock_timestamp() + r.ttl * interval '1 microsecond'
	FROM r WHERE l.ns = $1 AND l.key = r.key AND l.token = r.token AND r.token <> '' AND l.expires_at > clock_timestamp()
	RETURNING r.i, l.fence
),
g AS (SELECT key, jsonb_object_agg(token, ttl::int8) AS ttls, array_agg(i) AS ids, array_agg(token) AS tokens FROM r GROUP BY key),
lk AS MATERIALIZED (SELECT c.key FROM T c WHERE c.ns = $1 AND c.key IN (SELECT key FROM g) AND c.token = '' ORDER BY c.key FOR UPDATE),
s AS (
	UPDATE T AS l SET ` + readersSet(`(SELECT k, CASE WHEN g.ttls ? k THEN jsonb_build_array(`+nowMicros+` + (g.ttls->>k)::int8, v->1) ELSE v END
		FROM jsonb_each(l.readers) e(k, v) WHERE `+live("v")+`) x(k, v)`) + `
	FROM g JOIN lk ON lk.key = g.key WHERE l.ns = $1 AND l.key = g.key AND l.token = '' AND l.expires_at > clock_timestamp()
		AND NOT ` + bad("l") + `
	RETURNING ARRAY(SELECT i FROM unnest(g.ids, g.tokens) t(i, token) WHERE l.readers ? t.token) AS ids, l.fence
),
v AS (SELECT i, fence FROM u UNION ALL SELECT unnest(ids), fence FROM s)
SELECT ARRAY(SELECT i FROM v ORDER BY i), ARRAY(SELECT fence FROM v ORDER BY i), pg_backend_pid(), ''::text`

// tableRelease frees the row if $3 is its live writer, or takes reader $3
// out of it (the last live reader frees it), and does the rest as
// releaseSQL does: $3 leaves the queue, up to 8 expired entries of ns are
// swept, and a freed key, or a waiter leaving a FREE key's queue, is
// announced; it commits without waiting for the WAL.
var tableRelease = `WITH w AS (
	UPDATE T c SET token = NULL, holder = '', expires_at = NULL, pid = NULL
	WHERE c.ns = $1 AND c.key = $2 AND c.token = $3 AND $3 <> '' AND c.expires_at > clock_timestamp()
	RETURNING true AS freed
),
r AS (
	UPDATE T AS l SET ` + readersSet(`(SELECT k, v FROM jsonb_each(l.readers) e(k, v) WHERE k <> $3 AND `+live("v")+`) x(k, v)`) + `
	WHERE l.ns = $1 AND l.key = $2 AND l.token = '' AND ` + live("l.readers->$3") + ` AND NOT ` + bad("l") + `
	RETURNING l.token IS NULL AS freed
),
x AS (SELECT freed FROM w UNION ALL SELECT freed FROM r),
d AS (DELETE FROM Q WHERE ns = $1 AND key = $2 AND token = $3 AND EXISTS (SELECT 1 FROM x) IS NOT NULL RETURNING 1),
gc AS (
	DELETE FROM Q WHERE (ns, key, token) IN (SELECT ns, key, token FROM Q WHERE ns = $1
		AND expires_at <= clock_timestamp() AND EXISTS (SELECT 1 FROM x) IS NOT NULL LIMIT 8 FOR UPDATE SKIP LOCKED)
	RETURNING 1
),
n AS (
	SELECT pg_notify($4, COALESCE((SELECT CASE WHEN shared THEN '' ELSE token END FROM Q WHERE ns = $1 AND key = $2
		AND token <> $3 AND expires_at > clock_timestamp() ORDER BY seq LIMIT 1), '') || E'\n' || $2)
	WHERE EXISTS (SELECT 1 FROM x WHERE freed) OR (EXISTS (SELECT 1 FROM d) AND FREE)
)
SELECT EXISTS (SELECT 1 FROM x), (SELECT count(*) FROM n), set_config('synchronous_commit', 'off', true)`

func newTable(pool *pgxpool.Pool, c config) *TableStore {
	b := newBase(pool, c, func(int) string { return rowLive })
	// A reader may write fenced too; '' is no writer's token.
	b.fenceSQL = b.sql(`SELECT c.fence FROM T c WHERE c.ns = $1 AND c.key = $2 AND ((c.token = $3 AND $3 <> '')
	OR (c.token = '' AND ` + live("c.readers->$3") + `)) AND ` + rowLive + ` FOR SHARE OF c`)
	notLive := `NOT EXISTS (SELECT 1 FROM T c WHERE c.ns = $1 AND c.key = $2 AND ` + rowLive + `)`
	// A waiter that leaves a key no writer holds announces it: readers
	// queued behind it may join the readers.
	noWriter := `NOT EXISTS (SELECT 1 FROM T c WHERE c.ns = $1 AND c.key = $2 AND c.token <> '' AND ` + rowLive + `)`
	queue := fill(queueAfter, "GRANTED", granted, "FREE", notLive)
	return &TableStore{
		base:       b,
		acquireSQL: b.sql(fill(tableAcquire, "QUEUE", queue)),
		sharedSQL:  b.sql(fill(sharedAcquire, "QUEUE", fill(queue, "SHARED", "true"))),
		renewSQL:   b.sql(tableRenew),
		writersSQL: b.sql(fill(renewSQL, "COND", "r.token <> '' AND l.expires_at > clock_timestamp()", "EXTRA", "''::text")),
		releaseSQL: b.sql(fill(tableRelease, "FREE", noWriter)),
		infoSQL: b.sql(`SELECT COALESCE(` + rowLive + `, false), COALESCE(c.token = '', false), c.holder, c.fence, ` + remaining + `,
	CASE WHEN NOT ` + bad("c") + ` THEN (SELECT count(*) FROM jsonb_each(c.readers) e(k, v) WHERE ` + live("v") + `) END
	FROM T c WHERE c.ns = $1 AND c.key = $2`),
	}
}

var (
	_ driver.BatchAcquirer = (*TableStore)(nil)
	_ driver.BatchReleaser = (*TableStore)(nil)
)

// Caps reports a FIFO store that keeps shared holds.
func (s *TableStore) Caps() driver.Caps {
	c := s.base.Caps()
	c.Shared = true
	return c
}

// Acquire is AcquireMany of r alone: one statement (see driver.Store), as
// one of its readers if r.Shared.
func (s *TableStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	gs, errs := s.AcquireMany(ctx, []driver.Request{r})
	return gs[0], errs[0]
}

// AcquireMany sends Acquire's statements for rs in one batch, in key order:
// one round trip and one implicit transaction, so the rows a refused or
// granted attempt locks stay locked until the batch commits, and an error
// of the server (not a refusal) fails the whole batch.
func (s *TableStore) AcquireMany(ctx context.Context, rs []driver.Request) ([]driver.Grant, []error) {
	gs, errs, as := make([]driver.Grant, len(rs)), make([]error, len(rs)), make([]acquired, len(rs))
	batch := &pgx.Batch{}
	for _, i := range byKey(rs) {
		sql := s.acquireSQL
		if rs[i].Shared {
			sql = s.sharedSQL
		}
		if errs[i] = unfit(rs[i]); rs[i].Token == "" { // '' marks the readers' rows
			errs[i] = fmt.Errorf("pglease: acquire %q: %w", rs[i].Key, lease.Invalid("token", "empty"))
		} else if errs[i] == nil {
			s.queueAcquire(batch, rs[i], sql, &as[i])
		}
	}
	err := send(ctx, s.pool, batch)
	for i, r := range rs {
		if errs[i] == nil {
			gs[i], errs[i] = as[i].result(r, s.maxWaiters, err)
		}
	}
	return gs, errs
}

// Renew extends r.Key to r.TTL from now if r.Token holds it.
func (s *TableStore) Renew(ctx context.Context, r driver.Request) error {
	return s.RenewMany(ctx, []driver.Request{r})[0]
}

// RenewMany renews rs, writers and readers, in one statement (a second
// tells a broken lease from a lost one). Without readers it is renewSQL's
// plain update: the readers' part of tableRenew, which groups every request
// by key, about doubles the cost of a round of 100,000 writers.
func (s *TableStore) RenewMany(ctx context.Context, rs []driver.Request) []error {
	sql := s.writersSQL
	if slices.ContainsFunc(rs, func(r driver.Request) bool { return r.Shared }) {
		sql = s.renewSQL
	}
	fences, _, err := s.renew(ctx, s.pool, sql, rs)
	errs := make([]error, len(rs))
	for i, r := range rs {
		errs[i] = opErr("renew", r.Key, fences[i] != 0, err)
	}
	s.markBroken(ctx, "renew", rs, errs)
	return errs
}

// Release is ReleaseMany of r alone.
func (s *TableStore) Release(ctx context.Context, r driver.Request) error {
	return s.ReleaseMany(ctx, []driver.Request{r})[0]
}

// ReleaseMany frees each key of rs that its token holds (as a reader: if
// it was the last live one), takes the token out of the key's queue and
// announces the release of a key it freed: Release's statement for each, in
// one batch in key order (one round trip, one implicit transaction).
func (s *TableStore) ReleaseMany(ctx context.Context, rs []driver.Request) []error {
	released, errs := make([]bool, len(rs)), make([]error, len(rs))
	batch := &pgx.Batch{}
	for _, i := range byKey(rs) {
		if errs[i] = unfit(rs[i]); errs[i] != nil {
			continue
		}
		batch.Queue(s.releaseSQL, s.ns, rs[i].Key, rs[i].Token, s.channelName).QueryRow(func(row pgx.Row) error {
			return row.Scan(&released[i], nil, nil)
		})
	}
	err := send(ctx, s.pool, batch)
	for i, r := range rs {
		if errs[i] == nil {
			errs[i] = opErr("release", r.Key, released[i], err)
		}
	}
	return errs
}

// unfit refuses a request PostgreSQL's text cannot hold (a NUL byte), which
// would fail the whole batch.
func unfit(r driver.Request) error {
	if strings.ContainsRune(r.Key+r.Token+r.Holder, 0) {
		return fmt.Errorf("pglease: %q: %w", r.Key, lease.Invalid("request", "contains a NUL byte"))
	}
	return nil
}

// byKey returns the positions of rs in the order of their keys: batches
// lock rows in one order, against deadlocks between them.
func byKey(rs []driver.Request) []int {
	at := make([]int, len(rs))
	for i := range at {
		at[i] = i
	}
	slices.SortFunc(at, func(i, j int) int { return strings.Compare(rs[i].Key, rs[j].Key) })
	return at
}

// send sends batch on q, unless it is empty.
func send(ctx context.Context, q querier, batch *pgx.Batch) error {
	if batch.Len() == 0 {
		return nil
	}
	return q.SendBatch(ctx, batch).Close()
}

// Inspect reports who holds key, and its live readers; for a free key,
// Fence is the last granted.
func (s *TableStore) Inspect(ctx context.Context, key string) (driver.Info, error) {
	info := driver.Info{Key: key}
	var fence, us int64
	var readers *int64 // NULL: a bad row
	err := s.pool.QueryRow(ctx, s.infoSQL, s.ns, key).Scan(&info.Held, &info.Shared, &info.Holder, &fence, &us, &readers)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return info, nil
	case err != nil:
		return driver.Info{}, fmt.Errorf("pglease: inspect %q: %w", key, corrupt(err))
	case readers == nil:
		return driver.Info{}, fmt.Errorf("pglease: inspect %q: %w: %s", key, lease.ErrCorrupt, badMsg)
	case fence < 0 || info.Held && fence == 0:
		return driver.Info{}, fmt.Errorf("pglease: inspect %q: %w: fence %d", key, lease.ErrCorrupt, fence)
	case !info.Held:
		return driver.Info{Key: key, Fence: uint64(fence)}, nil
	case info.Shared:
		info.Readers = int(*readers)
	}
	info.Fence, info.Remaining = uint64(fence), time.Duration(us)*time.Microsecond
	return info, nil
}

// Close does nothing: the store holds no resources of its own.
func (s *TableStore) Close() error { return nil }
