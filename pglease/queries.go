// The SQL of both modes, built once per store around the quoted table name.

package pglease

import "strings"

// queries holds the statements of one store; see the package documentation
// for the schema.
type queries struct {
	create string

	tabAcquire, tabRenew, tabRelease, tabRenewMany, tabInspect, tabFence string

	advAcquire, advRenew, advRelease, advUnlock              string
	advForeignRenew, advForeignRelease, advInspect, advFence string
}

const schemaSQL = `CREATE TABLE IF NOT EXISTS T (
	ns         text        NOT NULL,
	key        text        NOT NULL,
	token      text,
	holder     text        NOT NULL DEFAULT '',
	fence      bigint      NOT NULL,
	expires_at timestamptz,
	pid        integer,
	PRIMARY KEY (ns, key)
)`

// remaining is the microseconds left before expires_at, by the server's clock.
const remaining = `COALESCE(GREATEST(floor(extract(epoch FROM c.expires_at - clock_timestamp()) * 1000000), 0), 0)::bigint`

// lockHeld is true when the advisory lock ($cls, $obj) is granted to the
// session c.pid in this database.
const lockHeld = `EXISTS (SELECT 1 FROM pg_locks k
	WHERE k.locktype = 'advisory' AND k.granted AND k.pid = c.pid
	AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND k.classid = $CLS::int4::oid AND k.objid = $OBJ::int4::oid AND k.objsubid = 2)`

func lockHeldAt(cls, obj string) string {
	return strings.NewReplacer("$CLS", cls, "$OBJ", obj).Replace(lockHeld)
}

func buildQueries(table string) queries {
	t := func(s string) string { return strings.ReplaceAll(s, " T ", " "+table+" ") }
	return queries{
		create: strings.Replace(schemaSQL, " T ", " "+table+" ", 1),

		// Table mode. $1 ns, $2 key, $3 token, $4 holder, $5 TTL in µs.
		// The upsert takes the row only when it is free, expired or already
		// ours; otherwise the second branch reports the holder (from the
		// statement's snapshot: empty if the row was committed after it).
		tabAcquire: t(`WITH acq AS (
	INSERT INTO T AS l (ns, key, token, holder, fence, expires_at)
	VALUES ($1, $2, $3, $4, 1, clock_timestamp() + $5::float8 * interval '1 microsecond')
	ON CONFLICT (ns, key) DO UPDATE SET
		token = excluded.token, holder = excluded.holder, expires_at = excluded.expires_at,
		fence = CASE WHEN l.token = excluded.token THEN l.fence ELSE l.fence + 1 END
	WHERE l.token IS NULL OR l.token = excluded.token OR l.expires_at <= clock_timestamp()
	RETURNING l.fence
)
SELECT true, fence, ''::text, 0::bigint FROM acq
UNION ALL
SELECT false, c.fence, c.holder, ` + remaining + ` FROM T c
WHERE c.ns = $1 AND c.key = $2 AND NOT EXISTS (SELECT 1 FROM acq)`),
		tabRenew: t(`UPDATE T SET expires_at = clock_timestamp() + $4::float8 * interval '1 microsecond'
WHERE ns = $1 AND key = $2 AND token = $3 AND expires_at > clock_timestamp()`),
		// $4 channel. The notification is sent when the statement commits.
		tabRelease: t(`WITH r AS (
	UPDATE T SET token = NULL, holder = '', expires_at = NULL
	WHERE ns = $1 AND key = $2 AND token = $3 AND expires_at > clock_timestamp()
	RETURNING key
), n AS (SELECT pg_notify($4, key) FROM r)
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n)`),
		tabRenewMany: t(`UPDATE T AS l SET expires_at = clock_timestamp() + r.ttl * interval '1 microsecond'
FROM unnest($2::text[], $3::text[], $4::float8[]) AS r(key, token, ttl)
WHERE l.ns = $1 AND l.key = r.key AND l.token = r.token AND l.expires_at > clock_timestamp()
RETURNING l.key, l.token`),
		tabInspect: t(`SELECT c.token IS NOT NULL AND c.expires_at > clock_timestamp(), c.holder, c.fence, ` + remaining + `
FROM T c WHERE c.ns = $1 AND c.key = $2`),
		// $1 ns, $2 key, $3 token.
		tabFence: t(`SELECT fence FROM T WHERE ns = $1 AND key = $2 AND token = $3
AND expires_at > clock_timestamp() FOR SHARE`),

		// Advisory mode, on the lease's own connection. $1 class, $2 object,
		// $3 ns, $4 key, $5 token, $6 holder, $7 TTL in µs, $8 TTL in ms
		// (idle_session_timeout), $9 keepalive idle in s, $10
		// tcp_user_timeout in ms. The lock, the fence increment and the
		// session settings happen in one round trip; when the lock is taken
		// by someone else, the row tells who (and whether it is our own
		// token, held through another connection).
		advAcquire: t(`WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($1, $2) AS ok),
a AS (
	INSERT INTO T AS r (ns, key, token, holder, fence, expires_at, pid)
	SELECT $3, $4, $5, $6, 1, clock_timestamp() + $7::float8 * interval '1 microsecond', pg_backend_pid() FROM l WHERE l.ok
	ON CONFLICT (ns, key) DO UPDATE SET token = excluded.token, holder = excluded.holder,
		fence = r.fence + 1, expires_at = excluded.expires_at, pid = excluded.pid
	RETURNING r.fence
),
s AS (SELECT set_config('idle_session_timeout', $8, false), set_config('tcp_keepalives_idle', $9, false),
	set_config('tcp_keepalives_interval', '1', false), set_config('tcp_keepalives_count', '1', false),
	set_config('tcp_user_timeout', $10, false) FROM l WHERE l.ok)
SELECT l.ok, COALESCE((SELECT fence FROM a), c.fence, 0),
	COALESCE(c.token = $5 AND ` + lockHeldAt("$1", "$2") + `, false),
	COALESCE(c.holder, ''), COALESCE(` + remaining + `, 0), (SELECT count(*) FROM s), pg_backend_pid()
FROM l LEFT JOIN T c ON c.ns = $3 AND c.key = $4`),
		// $1 ns, $2 key, $3 token, $4 TTL in µs, $5 TTL in ms. The row must
		// still name this token and this session.
		advRenew: t(`WITH u AS (
	UPDATE T SET expires_at = clock_timestamp() + $4::float8 * interval '1 microsecond'
	WHERE ns = $1 AND key = $2 AND token = $3 AND pid = pg_backend_pid()
	RETURNING fence
)
SELECT COALESCE((SELECT fence FROM u), 0), pg_backend_pid(), set_config('idle_session_timeout', $5, false)`),
		// $1 class, $2 object, $3 ns, $4 key, $5 token, $6 channel.
		advRelease: t(`WITH r AS (
	UPDATE T SET token = NULL, holder = '', expires_at = NULL, pid = NULL
	WHERE ns = $3 AND key = $4 AND token = $5 AND pid = pg_backend_pid()
	RETURNING key
), n AS (SELECT pg_notify($6, key) FROM r)
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n), pg_advisory_unlock($1, $2),
	set_config('idle_session_timeout', '0', false)`),
		advUnlock: `SELECT pg_advisory_unlock($1, $2), set_config('idle_session_timeout', '0', false)`,

		// Advisory mode, from a connection that does not hold the lock:
		// held means the row names the token and its session has the lock.
		// $1 class, $2 object, $3 ns, $4 key, $5 token.
		advForeignRenew: t(`SELECT EXISTS (SELECT 1 FROM T c WHERE c.ns = $3 AND c.key = $4 AND c.token = $5
	AND ` + lockHeldAt("$1", "$2") + `)`),
		// $6 channel. Clears the row; the holding session notices at its next
		// renewal and unlocks.
		advForeignRelease: t(`WITH r AS (
	UPDATE T c SET token = NULL, holder = '', expires_at = NULL, pid = NULL
	WHERE c.ns = $3 AND c.key = $4 AND c.token = $5 AND ` + lockHeldAt("$1", "$2") + `
	RETURNING key
), n AS (SELECT pg_notify($6, key) FROM r)
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n)`),
		// $1 ns, $2 key, $3 class, $4 object.
		advInspect: t(`SELECT c.token IS NOT NULL AND ` + lockHeldAt("$3", "$4") + `, c.holder, c.fence, ` + remaining + `
FROM T c WHERE c.ns = $1 AND c.key = $2`),
		// $1 class, $2 object, $3 ns, $4 key, $5 token.
		advFence: t(`SELECT c.fence FROM T c WHERE c.ns = $3 AND c.key = $4 AND c.token = $5
AND ` + lockHeldAt("$1", "$2") + ` FOR SHARE OF c`),
	}
}
