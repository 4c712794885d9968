// Package mysqllease holds leases in MariaDB or MySQL (database/sql with
// github.com/go-sql-driver/mysql), as two [driver.Store]s over one lease
// table:
//
//	db, _ := sql.Open("mysql", "user:pass@tcp(host:3306)/db?interpolateParams=true")
//	store, _ := mysqllease.New(db) // a TableStore; WithMode(ModeGetLock): a GetLockStore
//	_ = store.Migrate(ctx)         // once: CREATE TABLE IF NOT EXISTS
//	client, _ := lease.New(store)
//
// Migrate creates the lease table (WithTable, default "leasekit_leases",
// "database.table" allowed, quoted as an identifier), InnoDB, one row per
// key and namespace (WithNamespace). A key's row is never deleted: it keeps
// the key's fence, which only grows, across releases, expiries and restarts.
// Expiry is judged by the server's clock, in µs since the epoch from
// UTC_TIMESTAMP(6) (the session's time zone plays no part), never the
// client's. interpolateParams=true in the DSN saves the driver a prepare
// round trip per statement.
//
// [TableStore]: each operation is one statement on any pooled connection.
// Acquire is one INSERT ... ON DUPLICATE KEY UPDATE that takes the row when
// it is free, expired or already the token's, and returns the fence through
// LAST_INSERT_ID(expr); a refused Acquire reads the holder with a second
// statement. Renew and Release are one UPDATE each.
//
// [GetLockStore]: each lease is a GET_LOCK(name, 0), name = "leasekit_" and
// 48 hex digits of SHA-256(table, namespace, key), held by a connection taken
// from the pool for the lease alone (mind max_connections), whose session
// gets wait_timeout = TTL rounded up to seconds: the server frees the lock of
// a holder that stopped renewing, and at once when the connection ends. The
// row keeps the fence (fence+1 at every grant, written by the locking
// connection) and the connection's id; a lease is live while
// IS_USED_LOCK(name) is that id. Renewals run on the lease's connection; a
// statement's ctx keeps its deadline but not its cancellation (the driver
// cuts the connection of a cancelled statement). The TTL is fixed
// (Caps.FixedTTL) and at least a second.
//
// Neither store keeps a FIFO queue or shared holds, or announces releases:
// waiters poll (Caps and the Client's backoff).
//
// Listing and breaking (driver.Lister, driver.Breaker, both modes): List
// pages through the namespace's rows in byte order of their keys (VARBINARY,
// the primary key), one statement a page; rows are never deleted, so a
// listing reads every key ever taken under its prefix. Break clears a key's
// holder in one transaction (SELECT ... FOR UPDATE, UPDATE) and keeps a
// tombstone of the evicted token in the row's broken column (a JSON object,
// token: expiry in µs) until its hold would have expired: its renewal then
// fails with lease.ErrBroken. In GET_LOCK mode Break then ends the holder's
// connection with KILL CONNECTION (see GetLockStore.Break).
//
// MySQL 8: GET_LOCK, IS_USED_LOCK and RELEASE_LOCK behave as on MariaDB (as
// since MySQL 5.7: many locks per session, names up to 64 characters).
// VALUES() in ON DUPLICATE KEY UPDATE is deprecated since 8.0.20 (a warning,
// still supported); KILL CONNECTION needs CONNECTION_ADMIN (MariaDB: SUPER
// before 10.5, CONNECTION ADMIN since). No JSON type or function is used: the
// tombstones are TEXT parsed by the client.
package mysqllease
