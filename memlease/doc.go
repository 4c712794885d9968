// Package memlease is an in-memory [driver.Store]: for tests, examples and
// leases shared by the goroutines of one process.
//
// A [Store] keeps every key in a map guarded by a mutex, so each operation is
// atomic, and judges expiry by its clock ([WithClock]; by default the system
// clock). It implements [driver.Store] and the optional [driver.BatchRenewer],
// [driver.Notifier], [lease.Limiter] and [lease.Queuer]; [Plain] hides the
// optional ones, so the Client's fallback paths can be exercised too.
//
// Like a remote backend shared by several processes, the keys of a Store can
// be shared by several independent handles: [Store.Handle] returns a new
// *Store over the same keys whose Close closes only that handle. Give each
// lease.Client its own handle when the Client closes its store.
//
// Fences are kept per key for the life of the Store and never reused, so they
// strictly increase across holders, releases and expiries. A key's queue of
// waiters holds at most [WithMaxWaiters] of them (default
// driver.DefaultMaxWaiters), exactly.
package memlease
