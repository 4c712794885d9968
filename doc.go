// Package lease provides distributed leases with fencing tokens.
//
// A lease is a named lock with a time-to-live, kept in a store (Redis,
// PostgreSQL, etcd, ZooKeeper, a directory, memory: see package driver).
// The [Client] renews its leases in the background; if the holder dies, the
// store frees the lease when the TTL runs out.
//
// Every acquisition carries a fencing token ([Lease.Fence]), strictly larger
// than the fence of every earlier holder of the key. Have the resource you
// protect reject writes with a smaller fence (UPDATE ... SET lock_version =
// $fence WHERE lock_version <= $fence): a holder that paused past its TTL
// then cannot overwrite its successor's work. See docs/design.md.
package lease
