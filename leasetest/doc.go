// Package leasetest helps test lease stores and code that uses leases.
//
// [Run] is the conformance suite every driver.Store must pass: point a
// [Harness] at the store and call Run from a test. A subtest about an
// optional interface the store lacks skips ("lacks capability"). [Faulty] wraps a store to
// stall or fail its renewals and acquisitions, [NewFakeClock] makes time move
// only on demand, [Env] reads the address of a test server from the
// environment, skipping the test when it is unset, [AwaitFree] polls a
// store until it reports a key free, and [Queued] checks that a queueing
// Acquire is refused with the expected number of waiters ahead.
package leasetest
