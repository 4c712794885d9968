// Package lease provides distributed leases with fencing tokens.
//
// A lease is a named lock with a time-to-live, kept in a store (package
// driver; memlease, redislease, pglease, ...). The [Client] renews its leases
// in the background; if the holder dies, the store frees the key after the TTL.
//
// Every acquisition carries a fencing token ([Lease.Fence]) larger than every
// earlier holder's: have the protected resource reject writes with a smaller
// fence, so that a holder paused past its TTL cannot overwrite its successor's
// work. Readers of a read-write lease ([Client.AcquireShared]) share the
// fence of their read epoch, and a writer's is larger than theirs: a resource
// that keeps the largest fence it saw, on reads too, refuses a stale reader
// as well. See docs/design.md.
package lease
