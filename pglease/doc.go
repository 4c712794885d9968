// Package pglease is a lease.Store on PostgreSQL (pgx/v5, *pgxpool.Pool),
// in two modes that both pass the leasetest conformance suite.
//
//	pool, _ := pgxpool.New(ctx, dsn)
//	store, _ := pglease.New(pool)          // table mode, table "leasekit_leases"
//	_ = store.Migrate(ctx)                 // once: CREATE TABLE IF NOT EXISTS
//	client, _ := lease.New(store)
//
// # Schema
//
// Migrate creates the lease table (name set by WithTable, quoted with
// pgx.Identifier.Sanitize; "schema.table" is allowed) and the queue table
// beside it (Store.QueueTable: the name with "_queue" appended, in the same
// schema), each only if missing, and adds the queue's hand-off columns
// (holder, grant_ttl) when a queue table lacks them, so it also upgrades a
// database made by an earlier version. No operation creates them
// implicitly: a missing table is an error.
//
//	lease: ns text, key text, token text, holder text, fence bigint,
//	       expires_at timestamptz, pid integer, PRIMARY KEY (ns, key)
//	queue: ns text, key text, token text, seq bigserial,
//	       expires_at timestamptz, holder text, grant_ttl float8,
//	       PRIMARY KEY (ns, key, token), index (ns, expires_at)
//
// WithNamespace sets ns: stores with different namespaces share the table but
// not keys. A row is never deleted: it keeps the key's fence, so fences never
// go backwards, even across a server crash (the rows are durable).
//
// # Table mode (default)
//
// Each operation is one statement (one round trip) on any pooled connection,
// and expiry uses the server's clock (clock_timestamp()), never the
// client's. Acquire is an upsert that takes the row only when it is free,
// expired or already this token's, and returns the fence (incremented unless
// the token already held it) or, in the same statement, the current holder,
// fence and remaining time. Renew and Release match the token and an
// unexpired row; Release clears the token (or hands the key over, below)
// but keeps the fence and sends NOTIFY on the store's channel (one per table
// and namespace, payload the token of the first live waiter or nothing, a
// newline, and the key: only that waiter looks, see lease.Announcer).
// RenewMany renews all of a client's leases in one UPDATE ... FROM
// unnest(...). Subscribe LISTENs on one dedicated connection per Client.
//
// Hand-off: when the first live waiter of the key queued through a store
// that listens (a lease.Client's store, which subscribes while anyone
// waits), its entry carries its holder and TTL, and the holder's Release
// gives the key straight to it in the same statement: the row gets the
// waiter's token, holder, the next fence and an expiry of the waiter's TTL
// from then, the entry leaves the queue, and the payload names the waiter.
// The announcement only wakes the waiter: its Acquire finds the row already
// its own and gets the fence from it. The store never grants on the word of
// a payload, which any role may send with pg_notify (see docs/design.md, "A
// notification wakes; it never grants"). A release that hands the key over
// commits synchronously, as a grant does; a release that only frees the key
// commits without waiting for the WAL. A key handed to a
// waiter that died (or gave up just then) is held until that waiter's TTL,
// as a dead holder's would be, unless the waiter's give-up Release frees
// it: Release reads and locks the key's row in its latest version, so a
// give-up that raced with the hand-off frees the key, or hands it on, once
// the hand-off commits. Clients of an earlier version neither ask for nor
// take hand-offs (their entries have no TTL: the key is freed and announced
// to them as before).
//
// # Advisory mode
//
// WithMode(ModeAdvisory) holds each lease as a session-level
// pg_try_advisory_lock(class, object). The store keeps one dedicated
// connection (taken out of the pool: Hijack) per TTL in use, and holds every
// lease of that TTL on its session for as long as any of them is held; in
// the same statement as the lock, the key's row gets the new token and
// fence+1 (the durable per-key counter) and the session gets:
//
//   - idle_session_timeout = TTL: the server itself ends a session that sent
//     nothing (no renewal) for the TTL, which frees its locks. A heartbeat
//     round is one statement on that session for all its leases (RenewMany:
//     UPDATE ... FROM unnest(...)); the client considers a lease lost at
//     last-renewal-send + TTL - drift, before the server can free it.
//   - tcp_keepalives_idle = ceil(TTL) s, interval 1 s, count 1, and
//     tcp_user_timeout = TTL + 1 s: a backstop that makes the server drop a
//     dead peer's session in about TTL + 1 s instead of the Linux default of
//     over two hours, on servers where idle_session_timeout (PostgreSQL 14+)
//     is not available. They are not shorter than the TTL on purpose: a
//     server that dropped a merely partitioned holder's lock before the
//     holder's own deadline would let two clients believe they hold the key.
//
// Expiry is therefore per session, not per lease: a holder process that
// stops (crashes, is SIGSTOPped, loses the network) loses all its leases of
// that TTL together; a lease its Client gives up (released, or lost by its
// deadline) is unlocked on the session by its release. A session that ends
// for any reason (the client closes it, the server is restarted,
// pg_terminate_backend, the idle timeout, a failed statement) frees its
// locks at once; the holders' next renewal fails and the leases are reported
// lost (lease.ErrNotHeld). Statements on a session run one at a time, and the
// caller's ctx does not interrupt one already sent (pgx ends the connection
// of a cancelled statement, and with it every lease of the session): each is
// bounded by the TTL (at least 1 s) instead. A session whose last lease was
// released is kept for reuse with its idle timeout off (WithMaxIdleConns).
// Session locks are re-entrant, so the store never tries a lock its own
// session holds for a token the key's row names.
//
// Keys map to the two-int form: class = FNV-1a-32(table, namespace), object
// = FNV-1a-32(key). Two keys of a namespace collide with probability 2^-32;
// among n keys held at once, some pair collides with probability about
// n²/2^33 (1,000 keys: 0.01%; 10,000: 1.2%; 77,000: 50%). A collision is
// never unsafe: the two keys merely exclude each other (Acquire of one
// reports the other as holding it). Other applications that use two-int
// advisory locks in the same database could collide the same way.
//
// Advisory mode cannot work behind a transaction-mode (or statement-mode)
// pooler such as pgbouncer pool_mode=transaction: the pooler hands the server
// session, and with it the lock, to other clients after each transaction, and
// our next statement may run in another session. The store detects it: every
// renewal compares pg_backend_pid() with the session that took the lock and,
// when it differs, reports the lease lost with an error wrapping ErrPooler.
// Connect directly or through a session-mode pooler. (LISTEN, used by
// Subscribe in both modes, has the same requirement.)
//
// Renew and Release through a store that does not hold the lease's session
// (another Store value) see the row and pg_locks: Release clears the row and
// the holding session gives up its lock at the lease's next renewal; Renew
// cannot extend another session and returns an error.
//
// # FIFO queue of waiters (both modes)
//
// A key's queue holds at most [WithMaxWaiters] live waiters (default
// lease.DefaultMaxWaiters); a new token beyond it gets a
// *lease.QueueFullError. The cap is exact: a queued attempt first takes a
// transaction-level advisory lock of its key (one-bigint form, a hash of
// table, namespace and key), in the same round trip and implicit
// transaction as the acquire statement, whose snapshot then counts every
// entry queued before. Queued attempts of one key therefore run one after
// the other; unqueued attempts, renewals and releases never take the lock.
//
// The store implements lease.Queuer: a freed key goes to the waiter that has
// waited longest, not to whoever asks first (the releaser, typically). A
// waiting lease.Client acquires with Request.Queue; when the key cannot be
// granted, the same statement queues its token in the queue table (or
// refreshes its entry, keeping its place) with an expiry of TTL by the
// server's clock. A key that is free is granted only to a token with no live
// entry queued ahead of it, queued or not (so TryAcquire is refused while
// waiters are queued, with a *lease.HeldError whose Queued counts them); the
// grant deletes the token's entry. In advisory mode only the head of the
// queue calls pg_try_advisory_lock, in the same statement. Release deletes
// the token's entry too (a waiter giving up; it still returns ErrNotHeld if
// the token held nothing) and sends NOTIFY when it removed one while the key
// is free, so the next waiter looks again. Acquire, Renew and Release stay
// one statement each.
//
// An entry that is not refreshed (a waiter that died) stops counting after
// its TTL: it delays the others by at most one TTL. Acquire deletes the
// expired entries of its key, and each Release deletes up to 8 expired
// entries of the namespace, so queues of keys nobody uses again do not pile
// up. Queue checks read the statement's snapshot: a waiter that queues at
// the very moment a key is freed may be overtaken by one acquirer, and then
// gets the key at that acquirer's release. For the same reason a release
// can name, as the next waiter, one whose entry became visible before an
// earlier entry that was still committing; unless the release hands that
// waiter the key (table mode, a waiter whose store listens), the waiter is
// then refused (the earlier entry is ahead of it), and its refused Acquire,
// finding the key free but reserved for the waiters ahead, announces the
// key to the head of the queue, which would otherwise sleep until its own
// timer. Mutual exclusion never depends on the queue (the row upsert or the
// advisory lock decide). Clients of an earlier version, which ignore the
// queue, may still take a free key ahead of the waiters while both run
// against one database.
//
// # Fenced writes
//
// [Store.FencedTx] runs the caller's writes in a transaction that first
// checks, in that transaction and under a FOR SHARE row lock, that the lease
// still holds (table mode: token, fence and expiry by the server's clock;
// advisory mode: token, fence and the lock in pg_locks). A holder paused past
// its TTL has its write rejected with an error matching lease.ErrNotHeld, and
// a takeover cannot complete until a checked transaction commits.
//
// For tables the caller owns, store the fence beside the data and let each
// write carry it (the lock_version pattern):
//
//	UPDATE accounts SET balance = $1, lock_version = $fence
//	 WHERE id = $2 AND lock_version <= $fence
//
// Zero rows affected means a newer holder already wrote: the write is stale.
// (With "<" instead of "<=", each holder may write only once.)
package pglease
