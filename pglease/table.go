// TableStore: each lease is a row whose expiry the server's clock enforces;
// every operation is one statement on any pooled connection.

package pglease

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease/driver"
)

// TableStore keeps each lease as a row of the lease table. It is safe for
// concurrent use and does not own the pool.
type TableStore struct {
	base
	acquireSQL, renewSQL, releaseSQL string
}

// rowLive is true when the key's row c names a live holder.
const rowLive = `(c.token IS NOT NULL AND c.expires_at > clock_timestamp())`

// tableAcquire takes the row when it is ours and live, or free or expired
// with no live waiter ahead of us (ah); the fence grows unless it was ours.
// The upsert is not even tried (so it takes no row lock, and a refused
// attempt never waits for the holder's release) when the snapshot shows
// the key held by another live token, or reserved for waiters ahead.
const tableAcquire = `WITH ` + liveQueue + `,
acq AS (
	INSERT INTO T AS l (ns, key, token, holder, fence, expires_at)
	SELECT $1, $2, $3, $4, 1, clock_timestamp() + $5::float8 * interval '1 microsecond'
	WHERE NOT EXISTS (SELECT 1 FROM T c WHERE c.ns = $1 AND c.key = $2 AND c.token <> $3 AND ` + rowLive + `)
		AND ((SELECT n FROM ah) = 0 OR EXISTS (SELECT 1 FROM T x WHERE x.ns = $1 AND x.key = $2 AND x.token = $3))
	ON CONFLICT (ns, key) DO UPDATE SET
		token = excluded.token, holder = excluded.holder, expires_at = excluded.expires_at,
		fence = CASE WHEN l.token = excluded.token THEN l.fence ELSE l.fence + 1 END
	WHERE (l.token = excluded.token AND l.expires_at > clock_timestamp())
		OR ((l.token IS NULL OR l.expires_at <= clock_timestamp()) AND (SELECT n FROM ah) = 0)
	RETURNING l.fence
),
QUEUE
SELECT a.fence IS NOT NULL, COALESCE(a.fence, c.fence, 0), COALESCE(c.holder, ''), ` + remaining + `,
	COALESCE(` + rowLive + `, false), ah.n, (SELECT count(*) FROM wk), (SELECT count(*) FROM enq), pg_backend_pid(), false
FROM ah LEFT JOIN acq a ON true LEFT JOIN T c ON c.ns = $1 AND c.key = $2`

func newTable(pool *pgxpool.Pool, c config) *TableStore {
	b := newBase(pool, c, func(int) string { return rowLive })
	notLive := `NOT EXISTS (SELECT 1 FROM T c WHERE c.ns = $1 AND c.key = $2 AND ` + rowLive + `)`
	return &TableStore{
		base:       b,
		acquireSQL: b.sql(fill(tableAcquire, "QUEUE", fill(queueAfter, "GRANTED", "EXISTS (SELECT 1 FROM acq)", "FREE", notLive))),
		renewSQL:   b.sql(fill(renewSQL, "COND", "l.expires_at > clock_timestamp()", "EXTRA", "''::text")),
		releaseSQL: b.release("c.expires_at > clock_timestamp()", notLive),
	}
}

// Acquire takes r.Key for r.Token in one statement (see driver.Store).
func (s *TableStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	a, err := s.acquire(ctx, s.pool, r, s.acquireSQL)
	return a.result(r, s.maxWaiters, err)
}

// Renew extends r.Key to r.TTL from now if r.Token holds it.
func (s *TableStore) Renew(ctx context.Context, r driver.Request) error {
	return s.RenewMany(ctx, []driver.Request{r})[0]
}

// RenewMany renews rs in one statement.
func (s *TableStore) RenewMany(ctx context.Context, rs []driver.Request) []error {
	fences, _, err := s.renew(ctx, s.pool, s.renewSQL, rs)
	errs := make([]error, len(rs))
	for i, r := range rs {
		errs[i] = opErr("renew", r.Key, fences[i] != 0, err)
	}
	return errs
}

// Release frees r.Key if r.Token holds it, takes r.Token out of the key's
// queue and announces the release.
func (s *TableStore) Release(ctx context.Context, r driver.Request) error {
	var released bool
	err := s.pool.QueryRow(ctx, s.releaseSQL, s.ns, r.Key, r.Token, s.channelName).Scan(&released, nil, nil)
	return opErr("release", r.Key, released, err)
}

// Close does nothing: the store holds no resources of its own.
func (s *TableStore) Close() error { return nil }
