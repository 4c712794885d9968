// The SQL of both modes, built once per store around the quoted table name.

package pglease

import (
	"strconv"
	"strings"
)

// queries holds the statements of one store; see the package documentation
// for the schema.
type queries struct {
	create, createQueue, createQueueIndex, addQueueColumns string

	tabAcquire, tabRenew, tabRelease, tabRenewMany, tabInspect, tabFence string

	advAcquire, advRenew, advRenewMany, advRelease, advUnlock string
	advForeignRenew, advForeignRelease, advInspect, advFence  string
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

// queueSchemaSQL is the FIFO queue of waiters (lease.Queuer) beside the
// lease table Q: one row per waiting token, in arrival order (seq), expiring
// TTL after its last refresh by the server's clock. A table-mode waiter
// whose store listens for announcements also leaves its holder and its TTL
// in µs (grant_ttl), so that a release can hand it the key (NULL: the
// release only announces the key to it).
const queueSchemaSQL = `CREATE TABLE IF NOT EXISTS Q (
	ns         text        NOT NULL,
	key        text        NOT NULL,
	token      text        NOT NULL,
	seq        bigserial   NOT NULL,
	expires_at timestamptz NOT NULL,
	holder     text,
	grant_ttl  float8,
	PRIMARY KEY (ns, key, token)
)`

// queueColumnsSQL counts the hand-off columns of the queue table $1 (a queue
// table made by an earlier version lacks them), and addQueueColumnsSQL adds
// them; Migrate runs the second only when the first finds fewer than two,
// since ALTER TABLE locks the table even when it changes nothing.
const (
	queueColumnsSQL = `SELECT count(*) FROM pg_attribute
WHERE attrelid = $1::regclass AND attname IN ('holder', 'grant_ttl') AND NOT attisdropped`
	addQueueColumnsSQL = `ALTER TABLE Q ADD COLUMN IF NOT EXISTS holder text, ADD COLUMN IF NOT EXISTS grant_ttl float8`
)

// queueIndexedSQL reports whether the queue table $1 has the index named $2,
// from the catalog alone (no lock on the table).
const queueIndexedSQL = `SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = $1::regclass AND c.relname = $2)`

// queueIndexSQL serves the sweep of expired entries of a namespace.
const queueIndexSQL = `CREATE INDEX IF NOT EXISTS I ON Q (ns, expires_at)`

// ahead: q is the key's live queue (from the statement's snapshot), ah.n the
// number of live entries ahead of token $TOK (all of them if it is not
// queued). $NS, $KEY, $TOK are the parameters' numbers.
const ahead = `q AS (
	SELECT token, seq FROM Q WHERE ns = $NS AND key = $KEY AND expires_at > clock_timestamp()
),
ah AS (
	SELECT count(*) AS n FROM q
	WHERE q.seq < COALESCE((SELECT seq FROM q WHERE token = $TOK), 9223372036854775807)
)`

// enqueue queues token $TOK for $TTL µs, or refreshes its entry in place
// (an expired entry goes to the back), when COND holds; $HOLD and $GTTL are
// its holder and the TTL of a hand-off to it (NULL: none). A token not in
// the live queue q is not queued when q holds $MAXW entries already; enq
// is then empty. (Queued attempts hold the key's queue lock, queuecap.go,
// so q counts every entry queued before.)
const enqueue = `enq AS (
	INSERT INTO Q AS e (ns, key, token, expires_at, holder, grant_ttl)
	SELECT $NS, $KEY, $TOK, clock_timestamp() + $TTL::float8 * interval '1 microsecond', $HOLD, $GTTL WHERE COND
		AND (EXISTS (SELECT 1 FROM q WHERE token = $TOK) OR (SELECT count(*) FROM q) < $MAXW)
	ON CONFLICT (ns, key, token) DO UPDATE SET expires_at = excluded.expires_at,
		seq = CASE WHEN e.expires_at <= clock_timestamp() THEN excluded.seq ELSE e.seq END,
		holder = excluded.holder, grant_ttl = excluded.grant_ttl
	RETURNING 1
)`

// sweepKey deletes the expired entries of the key other than $TOK's, and
// sweepNS up to 8 expired entries of the namespace, after AFTER ran (it is
// a CTE of the same statement: its row lock comes first). Both skip rows
// locked by others, so they never wait.
const (
	sweepKey = `gc AS (
	DELETE FROM Q WHERE (ns, key, token) IN (SELECT ns, key, token FROM Q AS g
		WHERE ns = $NS AND key = $KEY AND token <> $TOK AND expires_at <= clock_timestamp()
		AND (SELECT count(*) FROM AFTER) >= 0 FOR UPDATE SKIP LOCKED)
	RETURNING 1
)`
	sweepNS = `gc AS (
	DELETE FROM Q WHERE (ns, key, token) IN (SELECT ns, key, token FROM Q AS g
		WHERE ns = $NS AND expires_at <= clock_timestamp()
		AND (SELECT count(*) FROM AFTER) >= 0 LIMIT 8 FOR UPDATE SKIP LOCKED)
	RETURNING 1
)`
)

// head is the token of the first live waiter of the key other than $TOK
// (empty if none): an advisory-mode release names it in its announcement
// (see notify.go).
const head = `hd AS (
	SELECT COALESCE((SELECT token FROM Q WHERE ns = $NS AND key = $KEY AND token <> $TOK
		AND expires_at > clock_timestamp() ORDER BY seq LIMIT 1), '') AS token
)`

// wakeHead announces the key to the head of its queue ($CHAN, as a release
// does) when a waiter that was already queued ($TOK has a live entry in the
// statement's snapshot, q) is refused from a free key (COND) because waiters
// are queued ahead of it (ah): the release named it instead of an earlier
// entry that was still committing (see the package documentation, "FIFO
// queue of waiters"). A waiter new to the queue was named by nobody and
// does not announce. A SELECT part runs only if read: the statement's last
// column counts its rows.
const wakeHead = `wk AS (
	SELECT pg_notify($CHAN, (SELECT token FROM q ORDER BY seq LIMIT 1) || E'\n' || $KEY)
	WHERE (SELECT n FROM ah) > 0 AND EXISTS (SELECT 1 FROM q WHERE token = $TOK) AND COND
)`

// asyncCommit makes the statement's transaction commit without waiting for
// its WAL to reach the disk (synchronous_commit off, for this transaction
// only). Only releases use it: a release lost in a server crash leaves the
// lease held until its TTL, which is safe, and the next acquisition's
// synchronous commit flushes the WAL up to and past the release anyway.
const asyncCommit = `set_config('synchronous_commit', 'off', true)`

// remaining is the microseconds left before expires_at, by the server's clock.
const remaining = `COALESCE(GREATEST(floor(extract(epoch FROM c.expires_at - clock_timestamp()) * 1000000), 0), 0)::bigint`

// lockHeld is true when the advisory lock ($cls, $obj) is granted to the
// session c.pid in this database.
const lockHeld = `EXISTS (SELECT 1 FROM pg_locks k
	WHERE k.locktype = 'advisory' AND k.granted AND k.pid = c.pid
	AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND k.classid = $CLS::int4::oid AND k.objid = $OBJ::int4::oid AND k.objsubid = 2)`

// lockTaken is true when any session holds the advisory lock ($cls, $obj)
// in this database.
const lockTaken = `EXISTS (SELECT 1 FROM pg_locks k
	WHERE k.locktype = 'advisory' AND k.granted
	AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND k.classid = $CLS::int4::oid AND k.objid = $OBJ::int4::oid AND k.objsubid = 2)`

func lockHeldAt(cls, obj string) string {
	return strings.NewReplacer("$CLS", cls, "$OBJ", obj).Replace(lockHeld)
}

func lockTakenAt(cls, obj string) string {
	return strings.NewReplacer("$CLS", cls, "$OBJ", obj).Replace(lockTaken)
}

// params fills in a queue fragment: "$NS", "$KEY", "$TOK", "$TTL" become
// parameter numbers, COND and AFTER what the statement needs.
func params(frag string, kv ...string) string {
	return strings.NewReplacer(kv...).Replace(frag)
}

func buildQueries(table, queue, index string, maxWaiters int) queries {
	maxw := strconv.Itoa(maxWaiters)
	t := func(s string) string {
		return strings.NewReplacer(" T ", " "+table+" ", " Q ", " "+queue+" ").Replace(s)
	}
	// Table mode: $1 ns, $2 key, $3 token (and, to queue, $4 holder, $7
	// hand-off TTL).
	tq := func(frag, ttl, cond, after string) string {
		return params(frag, "$NS", "$1", "$KEY", "$2", "$TOK", "$3", "$TTL", ttl, "COND", cond, "AFTER", after,
			"$HOLD", "$4", "$GTTL", "$7::float8", "$CHAN", "$8", "$MAXW", maxw)
	}
	// Advisory mode: $3 ns, $4 key, $5 token; no hand-off (the lock is a
	// session's, and cannot be given to another).
	aq := func(frag, ttl, cond, after string) string {
		return params(frag, "$NS", "$3", "$KEY", "$4", "$TOK", "$5", "$TTL", ttl, "COND", cond, "AFTER", after,
			"$HOLD", "NULL::text", "$GTTL", "NULL::float8", "$CHAN", "$12", "$MAXW", maxw)
	}
	return queries{
		create:           strings.Replace(schemaSQL, " T ", " "+table+" ", 1),
		createQueue:      strings.Replace(queueSchemaSQL, " Q ", " "+queue+" ", 1),
		createQueueIndex: strings.NewReplacer(" I ", " "+index+" ", " Q ", " "+queue+" ").Replace(queueIndexSQL),
		addQueueColumns:  strings.Replace(addQueueColumnsSQL, " Q ", " "+queue+" ", 1),

		// Table mode. $1 ns, $2 key, $3 token, $4 holder, $5 TTL in µs, $6
		// queue, $7 the TTL in µs of a hand-off to the queued token (NULL:
		// its store does not listen, so the key is not handed to it), $8
		// channel (wk: a queued waiter refused from a free key wakes the
		// head, as in advisory mode). The
		// upsert takes the row only when it is already ours and live, or
		// free or expired with no live waiter queued ahead of us (ah, from
		// the statement's snapshot); otherwise the last branch
		// reports the holder (from the snapshot: none if the row was
		// committed after it) and how many waiters are ahead, and enq queues
		// us (or refreshes our entry) when $6. A grant takes us out of the
		// queue (deq). The upsert is not even tried (so it takes no row
		// lock) when the snapshot shows the key held by another live token,
		// or free but reserved for waiters ahead of a token that does not
		// hold it: refused attempts then never wait for, nor delay, the
		// holder's release; a release committed after the snapshot is
		// announced, and the waiter looks again.
		tabAcquire: t(`WITH ` + tq(ahead, "", "", "") + `,
acq AS (
	INSERT INTO T AS l (ns, key, token, holder, fence, expires_at)
	SELECT $1, $2, $3, $4, 1, clock_timestamp() + $5::float8 * interval '1 microsecond'
	WHERE NOT EXISTS (SELECT 1 FROM T x WHERE x.ns = $1 AND x.key = $2 AND x.token IS NOT NULL
			AND x.token <> $3 AND x.expires_at > clock_timestamp())
		AND ((SELECT n FROM ah) = 0 OR EXISTS (SELECT 1 FROM T x WHERE x.ns = $1 AND x.key = $2 AND x.token = $3))
	ON CONFLICT (ns, key) DO UPDATE SET
		token = excluded.token, holder = excluded.holder, expires_at = excluded.expires_at,
		fence = CASE WHEN l.token = excluded.token THEN l.fence ELSE l.fence + 1 END
	WHERE (l.token = excluded.token AND l.expires_at > clock_timestamp())
		OR ((l.token IS NULL OR l.expires_at <= clock_timestamp()) AND (SELECT n FROM ah) = 0)
	RETURNING l.fence
),
` + tq(enqueue, "$5", "$6::bool AND NOT EXISTS (SELECT 1 FROM acq)", "") + `,
deq AS (
	DELETE FROM Q WHERE ns = $1 AND key = $2 AND token = $3 AND EXISTS (SELECT 1 FROM acq)
	RETURNING 1
),
` + tq(sweepKey, "", "", "acq") + `,
` + tq(wakeHead, "", `NOT EXISTS (SELECT 1 FROM acq) AND NOT EXISTS (SELECT 1 FROM T x WHERE x.ns = $1 AND x.key = $2
		AND x.token IS NOT NULL AND x.expires_at > clock_timestamp())`, "") + `
SELECT true, fence, ''::text, 0::bigint, false, 0::bigint, 0::bigint, 0::bigint FROM acq
UNION ALL
SELECT false, COALESCE(c.fence, 0), COALESCE(c.holder, ''), COALESCE(` + remaining + `, 0),
	COALESCE(c.token IS NOT NULL AND c.expires_at > clock_timestamp(), false), ah.n, (SELECT count(*) FROM wk),
	(SELECT count(*) FROM enq)
FROM ah LEFT JOIN T c ON c.ns = $1 AND c.key = $2
WHERE NOT EXISTS (SELECT 1 FROM acq)`),
		tabRenew: t(`UPDATE T SET expires_at = clock_timestamp() + $4::float8 * interval '1 microsecond'
WHERE ns = $1 AND key = $2 AND token = $3 AND expires_at > clock_timestamp()`),
		// $4 channel. If we hold the key, hands it to the first live waiter
		// when that waiter's store listens (grant_ttl is set: its holder, its
		// TTL from now, the next fence, and out of the queue), and otherwise
		// frees it; takes us out of its queue. Announces the key (when the
		// statement commits) if it freed or handed it, or took us out of the
		// queue while the key is free, so that the next waiter looks again;
		// the payload names the first waiter (see notify.go), which takes a
		// key handed to it with its own Acquire (the row is then its own).
		//
		// lk locks the key's row first and reads its latest version (FOR
		// UPDATE), not the statement's snapshot: a waiter giving up while a
		// release hands it the key then frees it (or hands it on) once that
		// release commits, rather than missing it. hd locks the waiter's
		// entry, so that its own statements wait for the hand-off. A release
		// that hands the key over commits synchronously (the session's
		// setting), as a grant does; one that frees it commits without
		// waiting for the WAL (asyncCommit).
		tabRelease: t(`WITH lk AS MATERIALIZED (
	SELECT token = $3 AND expires_at > clock_timestamp() AS ours,
		token IS NOT NULL AND expires_at > clock_timestamp() AS live
	FROM T WHERE ns = $1 AND key = $2 FOR UPDATE
),
hd AS MATERIALIZED (
	SELECT token, holder, grant_ttl FROM Q WHERE ns = $1 AND key = $2 AND token <> $3
		AND expires_at > clock_timestamp() AND (SELECT count(*) FROM lk) >= 0
	ORDER BY seq LIMIT 1 FOR UPDATE
),
r AS (
	UPDATE T AS l SET token = h.token, holder = COALESCE(h.holder, ''),
		expires_at = clock_timestamp() + h.grant_ttl * interval '1 microsecond',
		fence = CASE WHEN h.token IS NULL THEN l.fence ELSE l.fence + 1 END
	FROM (SELECT 1) AS z LEFT JOIN (SELECT token, holder, grant_ttl FROM hd WHERE grant_ttl IS NOT NULL) AS h ON true
	WHERE l.ns = $1 AND l.key = $2 AND (SELECT ours FROM lk)
	RETURNING h.token AS handed, l.fence
),
d AS (
	DELETE FROM Q WHERE ns = $1 AND key = $2 AND (token = $3 OR token = (SELECT handed FROM r))
	RETURNING token
),
` + tq(sweepNS, "", "", "r") + `,
n AS (SELECT pg_notify($4, COALESCE((SELECT handed FROM r), (SELECT token FROM hd), '') || E'\n' || $2)
	WHERE EXISTS (SELECT 1 FROM r) OR (EXISTS (SELECT 1 FROM d WHERE token = $3)
		AND NOT COALESCE((SELECT live FROM lk), false)))
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n), (SELECT count(*) FROM d WHERE token = $3),
	set_config('synchronous_commit', CASE WHEN EXISTS (SELECT 1 FROM r WHERE handed IS NOT NULL)
		THEN current_setting('synchronous_commit') ELSE 'off' END, true)`),
		tabRenewMany: t(`UPDATE T AS l SET expires_at = clock_timestamp() + r.ttl * interval '1 microsecond'
FROM unnest($2::text[], $3::text[], $4::float8[]) AS r(key, token, ttl)
WHERE l.ns = $1 AND l.key = r.key AND l.token = r.token AND l.expires_at > clock_timestamp()
RETURNING l.key, l.token`),
		tabInspect: t(`SELECT c.token IS NOT NULL AND c.expires_at > clock_timestamp(), c.holder, c.fence, ` + remaining + `
FROM T c WHERE c.ns = $1 AND c.key = $2`),
		// $1 ns, $2 key, $3 token.
		tabFence: t(`SELECT fence FROM T WHERE ns = $1 AND key = $2 AND token = $3
AND expires_at > clock_timestamp() FOR SHARE`),

		// Advisory mode, on the session the store keeps for leases of this
		// TTL. $1 class, $2 object, $3 ns, $4 key, $5 token, $6 holder, $7
		// TTL in µs, $8 TTL in ms (idle_session_timeout), $9 keepalive idle
		// in s, $10 tcp_user_timeout in ms, $11 queue, $12 channel. Only the head of the
		// key's queue (no live waiter ahead, ah) tries the lock, and not
		// when this very session already holds it for a token the row names
		// (session locks are re-entrant: the try would succeed). The lock,
		// the fence increment, the session settings and the queue update
		// happen in one round trip; when the lock is not ours, the row tells
		// who has it (and whether it is our own token, held through another
		// connection: o), and enq queues us (or refreshes our entry) when $11;
		// a queued waiter refused from a free key wakes the head (wk).
		advAcquire: t(`WITH ` + aq(ahead, "", "", "") + `,
l AS MATERIALIZED (SELECT CASE WHEN (SELECT n FROM ah) = 0 AND NOT EXISTS (SELECT 1 FROM T c
	WHERE c.ns = $3 AND c.key = $4 AND c.token IS NOT NULL AND c.pid = pg_backend_pid() AND ` + lockHeldAt("$1", "$2") + `)
	THEN pg_try_advisory_lock($1, $2) ELSE false END AS ok),
a AS (
	INSERT INTO T AS r (ns, key, token, holder, fence, expires_at, pid)
	SELECT $3, $4, $5, $6, 1, clock_timestamp() + $7::float8 * interval '1 microsecond', pg_backend_pid() FROM l WHERE l.ok
	ON CONFLICT (ns, key) DO UPDATE SET token = excluded.token, holder = excluded.holder,
		fence = r.fence + 1, expires_at = excluded.expires_at, pid = excluded.pid
	RETURNING r.fence
),
s AS (SELECT set_config('idle_session_timeout', $8, false), set_config('tcp_keepalives_idle', $9, false),
	set_config('tcp_keepalives_interval', '1', false), set_config('tcp_keepalives_count', '1', false),
	set_config('tcp_user_timeout', $10, false) FROM l WHERE l.ok),
o AS MATERIALIZED (SELECT EXISTS (SELECT 1 FROM T c WHERE c.ns = $3 AND c.key = $4 AND c.token = $5
	AND ` + lockHeldAt("$1", "$2") + `) AS ours),
` + aq(enqueue, "$7", "$11::bool AND NOT (SELECT ok FROM l) AND NOT (SELECT ours FROM o)", "") + `,
deq AS (
	DELETE FROM Q WHERE ns = $3 AND key = $4 AND token = $5 AND (SELECT ok FROM l)
	RETURNING 1
),
` + aq(sweepKey, "", "", "l") + `,
` + aq(wakeHead, "", "NOT (SELECT ok FROM l) AND NOT (SELECT ours FROM o) AND NOT "+lockTakenAt("$1", "$2"), "") + `
SELECT l.ok, COALESCE((SELECT fence FROM a), c.fence, 0), o.ours,
	COALESCE(c.holder, ''), COALESCE(` + remaining + `, 0), (SELECT count(*) FROM s), pg_backend_pid(),
	COALESCE(c.token IS NOT NULL AND ` + lockHeldAt("$1", "$2") + `, false), (SELECT n FROM ah),
	(SELECT count(*) FROM wk), (SELECT count(*) FROM enq)
FROM l CROSS JOIN o LEFT JOIN T c ON c.ns = $3 AND c.key = $4`),
		// $1 ns, $2 key, $3 token, $4 TTL in µs, $5 TTL in ms. The row must
		// still name this token and this session.
		advRenew: t(`WITH u AS (
	UPDATE T SET expires_at = clock_timestamp() + $4::float8 * interval '1 microsecond'
	WHERE ns = $1 AND key = $2 AND token = $3 AND pid = pg_backend_pid()
	RETURNING fence
)
SELECT COALESCE((SELECT fence FROM u), 0), pg_backend_pid(), set_config('idle_session_timeout', $5, false)`),
		// $1 ns, $2 keys, $3 tokens, $4 TTLs in µs, $5 TTL in ms: every
		// lease of the session in one statement (the heartbeat's round);
		// returns the session's pid and the leases renewed.
		advRenewMany: t(`WITH u AS (
	UPDATE T AS l SET expires_at = clock_timestamp() + r.ttl * interval '1 microsecond'
	FROM unnest($2::text[], $3::text[], $4::float8[]) AS r(key, token, ttl)
	WHERE l.ns = $1 AND l.key = r.key AND l.token = r.token AND l.pid = pg_backend_pid()
	RETURNING l.key, l.token
)
SELECT pg_backend_pid(), set_config('idle_session_timeout', $5, false),
	ARRAY(SELECT key FROM u), ARRAY(SELECT token FROM u)`),
		// $1 class, $2 object, $3 ns, $4 key, $5 token, $6 channel, $7 the
		// session's idle_session_timeout afterwards ('0' once it holds no
		// lease). Frees the row and the lock, takes us out of the queue,
		// announces the key.
		advRelease: t(`WITH r AS (
	UPDATE T SET token = NULL, holder = '', expires_at = NULL, pid = NULL
	WHERE ns = $3 AND key = $4 AND token = $5 AND pid = pg_backend_pid()
	RETURNING key
),
d AS (
	DELETE FROM Q WHERE ns = $3 AND key = $4 AND token = $5 AND (SELECT count(*) FROM r) >= 0
	RETURNING 1
),
` + aq(sweepNS, "", "", "r") + `,
` + aq(head, "", "", "") + `,
n AS (SELECT pg_notify($6, (SELECT token FROM hd) || E'\n' || $4) WHERE EXISTS (SELECT 1 FROM r) OR EXISTS (SELECT 1 FROM d))
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n), pg_advisory_unlock($1, $2),
	set_config('idle_session_timeout', $7, false), ` + asyncCommit + `, pg_backend_pid()`),
		// $1 class, $2 objects, $3 idle_session_timeout afterwards: gives
		// up one level of each lock (leases this session no longer holds).
		advUnlock: `SELECT (SELECT count(*) FROM unnest($2::int4[]) AS o WHERE pg_advisory_unlock($1, o)),
	set_config('idle_session_timeout', $3, false)`,

		// Advisory mode, from a connection that does not hold the lock:
		// held means the row names the token and its session has the lock.
		// $1 class, $2 object, $3 ns, $4 key, $5 token.
		advForeignRenew: t(`SELECT EXISTS (SELECT 1 FROM T c WHERE c.ns = $3 AND c.key = $4 AND c.token = $5
	AND ` + lockHeldAt("$1", "$2") + `)`),
		// $6 channel. Clears the row; the holding session notices at its next
		// renewal and unlocks. Takes the token out of the key's queue (a
		// waiter giving up), announcing the key if no session has its lock.
		advForeignRelease: t(`WITH r AS (
	UPDATE T c SET token = NULL, holder = '', expires_at = NULL, pid = NULL
	WHERE c.ns = $3 AND c.key = $4 AND c.token = $5 AND ` + lockHeldAt("$1", "$2") + `
	RETURNING key
),
d AS (
	DELETE FROM Q WHERE ns = $3 AND key = $4 AND token = $5 AND (SELECT count(*) FROM r) >= 0
	RETURNING 1
),
` + aq(sweepNS, "", "", "r") + `,
` + aq(head, "", "", "") + `,
n AS (SELECT pg_notify($6, (SELECT token FROM hd) || E'\n' || $4) WHERE EXISTS (SELECT 1 FROM r)
	OR (EXISTS (SELECT 1 FROM d) AND NOT ` + lockTakenAt("$1", "$2") + `))
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n), ` + asyncCommit + ``),
		// $1 ns, $2 key, $3 class, $4 object.
		advInspect: t(`SELECT c.token IS NOT NULL AND ` + lockHeldAt("$3", "$4") + `, c.holder, c.fence, ` + remaining + `
FROM T c WHERE c.ns = $1 AND c.key = $2`),
		// $1 class, $2 object, $3 ns, $4 key, $5 token.
		advFence: t(`SELECT c.fence FROM T c WHERE c.ns = $3 AND c.key = $4 AND c.token = $5
AND ` + lockHeldAt("$1", "$2") + ` FOR SHARE OF c`),
	}
}
