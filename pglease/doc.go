// Package pglease holds leases in PostgreSQL (pgx/v5, *pgxpool.Pool), as two
// [driver.Store]s that share the schema, the FIFO queue and LISTEN/NOTIFY:
//
//	pool, _ := pgxpool.New(ctx, dsn)
//	store, _ := pglease.New(pool)   // a TableStore; WithMode(ModeAdvisory): an AdvisoryStore
//	_ = store.Migrate(ctx)          // once: CREATE TABLE IF NOT EXISTS
//	client, _ := lease.New(store)
//
// Migrate creates the lease table (WithTable, default "leasekit_leases",
// "schema.table" allowed, quoted as an identifier) and the queue table beside
// it (QueueTable), each if missing, and adds the columns of shared holds and
// tombstones, and List's index, to tables made before them; no operation
// creates them. WithNamespace isolates keys within a table. A key's row is
// never deleted: it keeps the key's fence, which only grows, across
// releases, expiries and restarts (the rows are durable). Expiry is judged
// by the server's clock (clock_timestamp()), never the client's.
//
// [TableStore]: each operation is one statement on any pooled connection.
// Acquire upserts the row when it is free, expired or already the token's,
// and otherwise reports the holder in the same statement. RenewMany renews
// every lease in one statement; AcquireMany and ReleaseMany send each
// request's statement, in key order, in one batch (one round trip, one
// implicit transaction).
//
// Shared holds in a TableStore (Caps.Shared): a key's readers are kept in
// its row, whose token is then empty, as the jsonb readers column {token:
// [expiry in µs since the epoch, holder]}; expires_at is the last reader's
// expiry. A reader joining live readers gets the row's fence, one finding
// the key free the next fence. The row lock serialises a key's readers and
// writers, each statement deciding on the row's latest version.
//
// [AdvisoryStore]: each lease is also a session-level
// pg_try_advisory_lock(class, object), class = FNV-1a-32(table, namespace),
// object = FNV-1a-32(key) (two keys colliding merely exclude each other). The
// leases of one TTL share one connection taken out of the pool, whose
// session gets idle_session_timeout = TTL and TCP keepalives, so the server
// frees the locks of a holder that stopped renewing or vanished; a session
// that ends for any reason frees its locks at once. A statement whose ctx
// ends is cut, which ends its session. It needs session pooling: behind a
// transaction-mode pooler renewals fail with [ErrPooler].
//
// Shared holds (Caps.Shared, advisory mode): a reader's lease is a
// session-level pg_try_advisory_lock_shared on the same lock, and an entry
// [expiry in µs, holder, server process] under its token in the row's
// readers (jsonb), live while that process holds the lock shared. A
// reader's grant upserts the row, so a reader that finds live readers in
// the row's latest version (locked by the upsert) joins their fence, and
// one that finds none takes fence+1; a writer always takes fence+1 and
// clears the entries. A reader is refused only by a writer holding or
// queued ahead of it.
//
// FIFO (Caps.FIFO): a queued Acquire that is refused queues its token in the
// queue table (or refreshes its entry) for its TTL, in the same statement; a
// free key is granted only to a token with no live entry ahead. The cap
// (WithMaxWaiters) is exact: a queued attempt first takes a per-key
// pg_advisory_xact_lock in the same round trip. Release deletes the token's
// entry and sends NOTIFY on the store's channel, payload the head of the
// queue (empty if it is a reader), a newline and the key; it commits without waiting for the WAL (a
// release lost in a crash leaves the lease held until its TTL). An
// announcement only wakes a waiter: nothing is granted on its word, since any
// role may call pg_notify.
//
// Listing and breaking (driver.Lister, driver.Breaker, both modes): List
// pages through the namespace's rows in byte order of their keys (the index
// <table>_keys on (ns, key COLLATE "C"), which Migrate adds), one statement
// scanning a page of keys and one describing them. Rows are never deleted,
// so a listing reads every key ever taken under its prefix, free ones too.
// Break clears a key's holders in one statement and keeps a tombstone of
// each evicted token in the row's broken column (jsonb, token: expiry in µs)
// until its hold would have expired: its renewal then fails with
// lease.ErrBroken. In advisory mode the lock belongs to the holder's
// session, so Break, once the break has committed, ends that session with
// pg_terminate_backend (waiting up to 5 s): that needs the holder's role
// (or membership of it), or pg_signal_backend, and it frees every lock of
// the session, so the holder store's other leases of the same TTL are lost
// too (ErrNotHeld, not ErrBroken). Without the permission Break returns an
// error but the break stands: the holder gives the lock up at its next
// renewal, a stuck one when its session's idle timeout (TTL) ends it.
//
// Fenced writes: FencedTx runs the caller's writes in a transaction that
// first checks, under a FOR SHARE row lock, that the lease still holds (token,
// fence, and expiry or the advisory lock). For tables you own, store the
// fence beside the data and write with
//
//	UPDATE accounts SET balance = $1, lock_version = $fence
//	 WHERE id = $2 AND lock_version <= $fence
//
// (package fence/sqlfence writes that statement for any database/sql
// database).
//
// Why it is built this way: docs/design.md, "PostgreSQL stores".
package pglease
