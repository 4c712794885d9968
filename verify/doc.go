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
// Two more workloads ([Config.Workload]) run under the same faults:
//
//   - [WorkloadReadWrite]: every third worker is a writer (Acquire, fenced
//     read and write, as above); the others are readers ([lease.Client.AcquireShared],
//     fenced reads only, each keeping its lease through Hold renew
//     intervals, so that readers share). Readers of one read epoch share a
//     fence, and a writer's is larger, so the same register refuses a
//     reader's read once a writer has used it, as it refuses a stale
//     writer. The store must keep shared holds (driver.Caps.Shared): Run
//     refuses others with an error matching errors.ErrUnsupported.
//   - [WorkloadTransfer]: every worker acquires two keys with
//     [lease.Client.AcquireAll] (in a random order), reads two registers,
//     one per key, each checked against its key's fence, and moves an
//     amount between them in one atomic write of both — both rows in one
//     PostgreSQL transaction, or both records in one file under flock,
//     written with one pwrite — refused whole if either fence is stale.
//     Both registers start at 1000: their sum must stay 2000 in every
//     accepted read and after the run.
//
// Meanwhile a nemesis injects faults, one at a time: kill -9 of the holder (a
// new worker replaces it), SIGSTOP of the holder for 1.5×TTL, added latency
// and a cut connection between one worker and the store (through a loopback
// TCP proxy the harness puts in front of the store), a forced release of the
// holder's lease by an operator (Client.ForceRelease: the evicted holder
// keeps working until its next renewal, as a stuck holder would), a
// store restart when the caller provides one, and the store clock faults
// below. With [Config.Net] each worker
// runs in a network namespace of its own (see [NewNet]) and the nemesis
// drops real packets with nftables instead: a partition of the holder,
// one-way loss (its requests arrive, the replies do not), 30 % loss, a
// partition healed while a renewal is in flight, and the store's leader
// isolated together with the holder ([NetFaults]).
// When the caller can move
// the store server's wall clock (Config.StepClock; the tests run private
// servers under libfaketime), a step forward by 1.5×TTL under a holder
// (the store expires its lease early), a step back by as much, and a drift
// of +20 % for 5×TTL. The report counts the forward steps that let a second
// holder in while the first still used its lease (EarlyGrants).
//
// Every operation is recorded with its invocation and completion times, and
// the history is checked with porcupine against a model of a fenced lock
// and register: fences of acquisitions strictly increase in real time, and
// the register accepts exactly the operations whose fence is at least the
// largest it accepted. With readers, a reader's acquisition may instead
// have the fence of the read epoch it joins (equal to the largest granted,
// when that was a reader's); with two keys, each key's fences increase, and
// an operation is accepted iff both its fences are. A history that does not linearize is written as
// porcupine's HTML visualization. The [Report] also counts stale operations
// rejected and accepted (must be 0), leases stuck beyond the TTL after their
// holder died (must be 0), the longest fail-over, and — from the same history
// — how many operations of superseded holders a register without fencing
// would have let through. The read-write workload also counts, from the
// history, interleavings (a reader's read accepted after a writer with a
// larger fence had an operation accepted: must be 0) and the read epochs
// that two or more readers shared; the transfer workload, the accepted
// transfers and the reads and final state whose sum was not 2000 (must be 0).
// Every workload counts the acquisitions returned with a lease already lost
// or past its local deadline (a process paused between the grant and the
// return; for AcquireAll, also a first key lost while the others were
// acquired): the model then places each key's acquisition on its own.
//
// Long runs set [Config.Sample]: every worker reports its goroutine count
// over its output at that interval, and the harness reads the process's RSS
// and open file descriptors from /proc at once ([Sample]). [CheckGrowth]
// judges each process that lived long enough ([DefaultGrowth]: after a
// warm-up, the median of the last third of its samples against the first
// third's, within a fixed and a relative margin); growth is a violation.
// [Config.Survivors] keeps the first workers from being killed, so that
// some processes live through the whole run.
package verify
