// Package lease provides distributed leases with fencing tokens.
//
// A lease is a named lock kept in an external store (Redis, PostgreSQL, etcd,
// ZooKeeper, a host-local directory, or memory) with a time-to-live. The
// holder's [Client] renews it in the background (the heartbeat) every renew
// interval; if the holder dies, the store frees the lease when the TTL runs
// out, and if it is only slow, the heartbeat keeps it.
//
// Every acquisition carries a fencing token ([Lease.Fence]): a number that is
// strictly larger than the fence of every earlier holder of the same key. Pass
// it to the resource you protect and have the resource reject writes that carry
// a smaller fence (for example UPDATE ... SET lock_version = $fence WHERE
// lock_version <= $fence: the holder may write again under its own fence, and
// zero rows updated means a newer holder has written). That is what keeps a
// holder that paused past its TTL (a GC pause, a frozen VM) from overwriting
// its successor's work.
//
// The Client and Lease types own all timing: heartbeat, retries, the local
// deadline, loss, waiting and observer events. A [Store] is a small adapter
// that performs one atomic acquire, renew, release or inspect against one
// backend; optional interfaces ([BatchRenewer], [Notifier], [Limiter],
// [Queuer]) let a store offer more, and the Client detects them.
package lease
