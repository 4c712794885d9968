// Listing keys and breaking leases (driver.Lister, driver.Breaker), in both
// modes; a Break's tombstones live in the row's broken column, {token:
// expiry in µs since the epoch}.

package pglease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// pageSQL scans up to $4 keys of ns $1 after the cursor $2, from the prefix
// $3 on, in byte order (the index <table>_keys); UPPER may stop it before $5.
const pageSQL = `SELECT key FROM T WHERE ns = $1 AND key COLLATE "C" > $2 AND key COLLATE "C" >= $3 UPPER
	ORDER BY key COLLATE "C" LIMIT $4`

// entrySQL describes key s.key of row c (NULL: never taken) as an Entry, in
// JSON: its holders (a writer live if WLIVE, readers' entries e if RLIVE;
// pid, their server process in advisory mode), live queue and tombstones.
const entrySQL = `s.key, COALESCE((SELECT jsonb_agg(h) FROM (
	SELECT jsonb_build_object('Token', c.token, 'Holder', c.holder, 'Fence', c.fence,
		'Remaining', ` + remaining + ` * 1000, 'pid', c.pid) WHERE c.token <> '' AND WLIVE
	UNION ALL SELECT jsonb_build_object('Token', e.key, 'Holder', e.value->>1, 'Fence', c.fence, 'Shared', true,
		'Remaining', GREATEST((e.value->>0)::int8 - ` + nowMicros + `, 0) * 1000, 'pid', e.value->2)
	FROM jsonb_each(c.readers) e WHERE RLIVE) x(h)), '[]') AS holders,
COALESCE((SELECT jsonb_agg(jsonb_build_object('Token', q.token, 'Shared', q.shared, 'Remaining', QREM * 1000) ORDER BY q.seq)
	FROM Q q WHERE q.ns = $1 AND q.key = s.key AND q.expires_at > clock_timestamp()), '[]') AS waiters,
COALESCE((SELECT jsonb_agg(b.key) FROM jsonb_each(c.broken) b WHERE b.value::int8 > ` + nowMicros + `), '[]') AS broken`

// listSQL describes the keys $2 (lock objects $3) of ns $1.
const listSQL = `WITH s AS (SELECT * FROM unnest($2::text[], $3::int4[]) s(key, obj))LOCKS
SELECT ENTRY FROM s JOIN T c ON c.ns = $1 AND c.key = s.key`

// breakSQL frees key $2 (lock object $3) of ns $1, locked first, and returns
// it as it was, with its holders' server processes (advisory mode): it
// clears its holders, adds their tombstones to the live ones and, if
// ANNOUNCE, announces the key on $4 as a release does.
const breakSQL = `WITH s AS (SELECT $2::text AS key, $3::int4 AS obj)LOCKS,
c AS MATERIALIZED (SELECT * FROM T WHERE ns = $1 AND key = $2 FOR UPDATE),
e AS MATERIALIZED (SELECT ENTRY FROM s LEFT JOIN c ON true),
u AS (
	UPDATE T l SET token = NULL, holder = '', expires_at = NULL, pid = NULL, readers = NULL, broken =
		COALESCE((SELECT jsonb_object_agg(b.key, b.value) FROM jsonb_each(l.broken) b WHERE b.value::int8 > NOW), '{}')
		|| (SELECT jsonb_object_agg(h->>'Token', NOW + (h->>'Remaining')::int8 / 1000) FROM jsonb_array_elements(e.holders) h)
	FROM e WHERE l.ns = $1 AND l.key = $2 AND e.holders <> '[]'
	RETURNING 1
),
n AS (SELECT ` + announce + ` WHERE ANNOUNCE AND EXISTS (SELECT 1 FROM u))
SELECT e.*, ARRAY(SELECT DISTINCT (h->>'pid')::int FROM jsonb_array_elements(e.holders) h WHERE h->>'pid' IS NOT NULL), (SELECT count(*) FROM n)
FROM e`

// announce sends key $2 of ns $1 on channel $4 as releaseSQL does.
const announce = `pg_notify($4, COALESCE((SELECT CASE WHEN shared THEN '' ELSE token END FROM Q WHERE ns = $1 AND key = $2
	AND expires_at > clock_timestamp() ORDER BY seq LIMIT 1), '') || E'\n' || $2)`

// endSQL ends the sessions $3 of a broken advisory lease, waiting up to 5 s
// for each, counts those still there, and announces the key (as breakSQL).
const endSQL = `WITH k AS MATERIALIZED (SELECT p, pg_terminate_backend(p, 5000) AS ok FROM unnest($3::int4[]) p)
SELECT (SELECT count(*) FROM k WHERE NOT ok AND p IN (SELECT pid FROM pg_stat_activity)), ` + announce

// tombstonesSQL returns the indexes (from 1) of the tokens $3 of keys $2 of
// ns $1 that have live tombstones.
const tombstonesSQL = `SELECT r.i FROM unnest($2::text[], $3::text[]) WITH ORDINALITY r(key, token, i)
JOIN T c ON c.ns = $1 AND c.key = r.key WHERE (c.broken->>r.token)::int8 > ` + nowMicros

// listStatements are a store's statements of this file.
type listStatements struct{ page, prefixPage, entries, brk, end, tombstones string }

// newListStatements fills in the statements for b's mode.
func newListStatements(b base) listStatements {
	locks, wlive, rlive, announce := "", "c.expires_at > clock_timestamp()", live("e.value")+" AND NOT "+bad("c"), "true"
	if b.mode == ModeAdvisory { // lk: the granted locks of the store's class, read once
		locks = `, lk AS MATERIALIZED (SELECT k.pid, k.objid, k.mode FROM pg_locks k WHERE k.locktype = 'advisory'
	AND k.granted AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND k.classid = (` + strconv.Itoa(int(b.classID)) + `)::int4::oid AND k.objsubid = 2)`
		held := func(pid, mode string) string {
			return `(` + pid + `, s.obj::oid) IN (SELECT pid, objid FROM lk WHERE mode = '` + mode + `')` // a hashed subplan
		}
		wlive, rlive, announce = held("c.pid", "ExclusiveLock"), held("(e.value->>2)::int", "ShareLock"), "false"
	}
	entry := fill(entrySQL, "WLIVE", wlive, "RLIVE", rlive, "QREM", fill(remaining, "c.expires_at", "q.expires_at"))
	return listStatements{
		page:       b.sql(fill(pageSQL, "UPPER", "")),
		prefixPage: b.sql(fill(pageSQL, "UPPER", `AND key COLLATE "C" < $5`)),
		entries:    b.sql(fill(listSQL, "LOCKS", locks, "ENTRY", entry)),
		brk:        b.sql(fill(breakSQL, "LOCKS", locks, "ENTRY", entry, "NOW", nowMicros, "ANNOUNCE", announce)),
		end:        b.sql(endSQL),
		tombstones: b.sql(tombstonesSQL),
	}
}

// List returns the live keys among up to limit keys starting with prefix,
// in byte order, after cursor (the last key scanned): one statement scans
// the keys, a second describes them.
func (b *base) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	limit = max(limit, 1)
	sql, args := b.list.page, []any{b.ns, cursor, prefix, limit}
	if up, ok := above(prefix); ok {
		sql, args = b.list.prefixPage, append(args, up)
	}
	rows, _ := b.pool.Query(ctx, sql, args...)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(keys) == 0 {
		return nil, "", opErr("list", prefix, true, err)
	}
	objs := make([]int32, len(keys))
	for i, k := range keys {
		objs[i] = hash32(k)
	}
	var page []driver.Entry
	var e driver.Entry
	rows, _ = b.pool.Query(ctx, b.list.entries, b.ns, keys, objs)
	_, err = pgx.ForEachRow(rows, []any{&e.Key, &e.Holders, &e.Waiters, &e.Broken}, func() error {
		if len(e.Holders)+len(e.Waiters)+len(e.Broken) > 0 {
			page = append(page, e)
		}
		e = driver.Entry{} // JSON would decode into the same arrays
		return nil
	})
	if next := keys[len(keys)-1]; err == nil && len(keys) == limit {
		return page, next, nil
	}
	return page, "", opErr("list", prefix, true, err)
}

// above returns the least string above every string that starts with
// prefix, in byte order (its last character, plus one), if there is one.
func above(prefix string) (string, bool) {
	for p := prefix; p != ""; {
		r, n := utf8.DecodeLastRuneInString(p)
		switch p = p[:len(p)-n]; {
		case r == 0xd7ff: // the surrogates are no characters
			return p + "\ue000", true
		case r < utf8.MaxRune:
			return p + string(r+1), true
		}
	}
	return "", false
}

// breakKey runs breakSQL on key, and returns the server processes of its
// holders (advisory mode).
func (b *base) breakKey(ctx context.Context, key string) (driver.Entry, []int32, error) {
	e := driver.Entry{Key: key}
	var pids []int32
	err := b.pool.QueryRow(ctx, b.list.brk, b.ns, key, hash32(key), b.channelName).
		Scan(&e.Key, &e.Holders, &e.Waiters, &e.Broken, &pids, nil)
	return e, pids, opErr("break", key, true, err)
}

// Break frees key whoever holds it in one statement, leaving a tombstone
// of each evicted token until its hold would have expired, and announces it.
func (s *TableStore) Break(ctx context.Context, key string) (driver.Entry, error) {
	e, _, err := s.breakKey(ctx, key)
	return e, err
}

// Break frees key as TableStore.Break does, then ends the sessions of its
// holders (see the package doc) and announces it. The tombstones commit
// first, so a lease's loss, and a listing, never see a break as a release.
func (s *AdvisoryStore) Break(ctx context.Context, key string) (driver.Entry, error) {
	e, pids, err := s.breakKey(ctx, key)
	if err != nil || len(pids) == 0 {
		return e, err
	}
	var stuck int64
	err = s.pool.QueryRow(ctx, s.list.end, s.ns, key, pids, s.channelName).Scan(&stuck, nil)
	if err == nil && stuck > 0 {
		err = fmt.Errorf("%d sessions did not end within 5s", stuck)
	}
	s.forget(pids)
	if err != nil {
		return e, fmt.Errorf("pglease: break %q: broken, but its holders keep the lock until their next renewal: %w", key, err)
	}
	return e, nil
}

// forget drops the sessions of s whose server processes a Break ended: a
// statement would fail on them.
func (s *AdvisoryStore) forget(pids []int32) {
	s.mu.Lock()
	sessions := slices.Collect(maps.Values(s.sessions))
	s.mu.Unlock()
	for _, sess := range sessions {
		if !sess.mu.TryLock() {
			continue // its running statement fails, and exec ends it
		}
		if slices.Contains(pids, sess.pid) {
			closeConn(sess.conn)
			s.mu.Lock()
			if s.sessions[sess.ttlMs] == sess {
				delete(s.sessions, sess.ttlMs)
			}
			s.mu.Unlock()
		}
		sess.mu.Unlock()
	}
}

// markBroken turns those errors of rs, op's, that match lease.ErrNotHeld
// into ones matching lease.ErrBroken where the token has a live tombstone.
// If it cannot tell, a break reads as a loss: never as a lease still held.
func (b *base) markBroken(ctx context.Context, op string, rs []driver.Request, errs []error) {
	var at []int
	var keys, tokens []string
	for i, err := range errs {
		if errors.Is(err, lease.ErrNotHeld) {
			at, keys, tokens = append(at, i), append(keys, rs[i].Key), append(tokens, rs[i].Token)
		}
	}
	if len(at) == 0 {
		return
	}
	var j int64
	rows, _ := b.pool.Query(ctx, b.list.tombstones, b.ns, keys, tokens)
	_, _ = pgx.ForEachRow(rows, []any{&j}, func() error {
		errs[at[j-1]] = opErr(op, keys[j-1], false, lease.ErrBroken)
		return nil
	})
}
