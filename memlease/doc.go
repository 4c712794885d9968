// Package memlease is an in-memory [driver.Store]: for tests, examples and
// leases shared by the goroutines of one process.
//
// It is the reference implementation for store authors: read store.go beside
// package driver's doc. Each method is one atomic step under one mutex,
// where a real store makes one round trip to its backend.
//
// Guarantees:
//   - Expiry is judged by the store's clock ([WithClock]; by default the
//     system clock), so a fake clock in tests controls it exactly.
//   - Fences are kept per key for the life of the Store and strictly
//     increase across holders, releases and expiries.
//   - FIFO: a key's queue holds at most [WithMaxWaiters] live waiters, and
//     a free key goes only to the head of its live queue.
//   - Every release is announced to every subscription, naming the head of
//     the key's queue in [driver.Announcement].Next.
//
// Like a backend shared by processes, a Store's keys can be shared by
// several handles ([Store.Handle]); closing one closes only that handle.
// [Plain] hides FIFO and the optional interfaces, to test the Client's
// fallbacks.
package memlease
