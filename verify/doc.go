// Package verify is leasekit's fault-injection harness: it proves, on a real
// store, that fenced leases keep a protected resource safe while holders are
// killed, paused and cut off and the store restarts, and it backs the
// `lease verify` command.
//
// [Run] starts worker processes (re-executions of the current binary; the
// binary must call [MaybeWorker] first thing in main or TestMain). Each worker
// loops: acquire the key, read a fenced register, write it with its fence,
// release — or, in the holding variant, keep the lease through several
// heartbeats, reading and writing at each. Half the workers are "careless":
// they do not look at the lease between operations, as a process that checked
// and was then paused would not. The register is a real resource that
// rejects stale fences: a PostgreSQL row (lock_version) or a file under
// flock. A fenced read claims the register (it raises its fence), so once a
// new holder has read, no older holder's write can land.
//
// Meanwhile a nemesis injects faults, one at a time: kill -9 of the holder (a
// new worker replaces it), SIGSTOP of the holder for 1.5×TTL, added latency
// and a cut connection between one worker and the store (through a loopback
// TCP proxy the harness puts in front of the store), and a store restart
// when the caller provides one.
//
// Every operation is recorded with its invocation and completion times, and
// the history is checked with porcupine against a model of a fenced lock
// and register: fences of acquisitions strictly increase in real time, and
// the register accepts exactly the operations whose fence is at least the
// largest it accepted. A history that does not linearize is written as
// porcupine's HTML visualization. The [Report] also counts stale operations
// rejected and accepted (must be 0), leases stuck beyond the TTL after their
// holder died (must be 0), the longest fail-over, and — from the same history
// — how many operations of superseded holders a register without fencing
// would have let through.
package verify
