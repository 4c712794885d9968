// Package k8slease is a lease store (a [driver.Store]) on Kubernetes:
// each key is a coordination.k8s.io/v1 Lease object of one namespace,
// read and written through client-go, the objects client-go's leader
// election uses, with fencing tokens that leader election lacks.
//
//	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig) // or rest.InClusterConfig()
//	cfg.QPS, cfg.Burst = 1000, 2000 // client-go's default is 5 a second
//	cs, err := leasesv1.NewForConfig(cfg) // k8s.io/client-go/kubernetes/typed/coordination/v1
//	store, err := k8slease.New(cs, "my-namespace", k8slease.WithPrefix("myapp."))
//	client, err := lease.New(store)
//
// Guarantees:
//   - At most one holder per key: every change is an Update carrying the
//     resourceVersion the store read, so the apiserver (etcd underneath)
//     refuses it if anyone wrote the Lease in between; that conflict is a
//     transient error, and the Client's retry reads anew. A first grant
//     is a Create, refused if the object appeared meanwhile.
//   - Fences: the annotation leasekit.io/fence is the last fence granted;
//     a grant writes it + 1 in the same conditional write, and Release and
//     Break keep the object, so fences increase strictly for the life of
//     the object. Deleting the object (kubectl delete lease) starts them
//     over: don't, while fenced writes are in flight.
//   - Interoperability: a hold fills in the Lease as client-go's leader
//     election does (holderIdentity, leaseDurationSeconds rounded up to whole
//     seconds, acquireTime, renewTime, leaseTransitions = the fence up to
//     2³¹-1), so kubectl shows it and a leader elector of the same object
//     waits for it. The token, the key and the exact TTL live in
//     annotations. A Lease the store did not write (no leasekit.io/key
//     annotation, or another key's) is refused with lease.ErrInvalid, never
//     taken over; one whose annotations or holder no store writes (a fence
//     or TTL that is no canonical decimal, the fence MaxInt64, a holder
//     without holderIdentity), or such a waiter object, is lease.ErrCorrupt.
//
// # Which clock decides expiry
//
// The apiserver does not expire Leases: renewTime is a timestamp the
// holder writes from its own wall clock. A store judges a hold expired by
// whichever of two rules says so first:
//
//  1. client-go leader election's: the store has seen the Lease unchanged
//     (the same resourceVersion) for the hold's TTL by its own monotonic
//     clock, counting a Lease it wrote from before it sent the write and
//     one it read from when the answer came. This needs no clock
//     synchronisation, only clocks that run at about the same rate (NTP
//     slews them by at most 0.05%); but a store that first sees a Lease
//     late waits a whole TTL from then.
//  2. renewTime + TTL + [WithMaxClockSkew] (default 250 ms) is past by the
//     store's wall clock. This assumes the hosts' wall clocks agree within
//     that skew, and lets a store that never saw an abandoned Lease take it
//     right after its TTL. WithMaxClockSkew(-1) turns it off, leaving
//     rule 1 alone.
//
// The holder's Client counts its TTL from before its request, and the
// holder writes renewTime from before it too, so under either rule's
// assumption the holder gives the lease up before another store may take
// it. HeldError.Remaining and Info.Remaining are the judging store's view.
//
// The store keeps the resourceVersion and sighting time of each Lease it
// has seen (up to 65,536, then it forgets them all and counts anew: later,
// never earlier). Break's tombstone (leasekit.io/broken: token and until
// when by the breaker's wall clock) decides only whether the evicted
// holder's Renew says lease.ErrBroken or lease.ErrNotHeld.
//
// # The queue of waiters
//
// The store is FIFO (Caps.FIFO): each waiter of a key has its own small
// Lease object, named from the key's object name and a digest of its token,
// labelled leasekit.io/queue (a digest of the key's object name) and
// leasekit.io/store, and written only by its waiter, so waiters never
// contend for one object. Its place is its ticket: the resourceVersion the
// apiserver gave its Create, kept in the annotation leasekit.io/ticket from
// its first refresh on (resourceVersions grow with every write and compare
// as integers, KEP-5504). An entry lives as a hold does (its TTL, judged by
// the rules above) from its waiter's last refresh; a waiter that comes back
// after its entry expired gets a new ticket, at the back.
//
// Acquire of a key nobody holds lists the key's waiter objects (one list
// with a label selector) and grants the key only to the token with no live
// waiter ahead of it; the grant is the same conditional write as ever, so
// two racing grants still cannot both succeed, and the granted waiter then
// deletes its object. A refused Acquire with Request.Queue creates or
// refreshes the token's object; HeldError.Queued counts the live waiters
// ahead. A newcomer is refused with a *lease.QueueFullError when
// [WithMaxWaiters] live waiters are queued (default
// driver.DefaultMaxWaiters); newcomers that count at the same instant may
// all join, so the cap is not exact under a burst. Release of a holder
// names the head waiter in the annotation leasekit.io/next of the key's
// object, which [Store.Subscribe] announces as Announcement.Next, so only
// that waiter looks; Release of a queued token deletes its object. Break
// keeps the queue. List and the watch select key objects only
// (!leasekit.io/queue); List describes each key's waiters from one more
// list per page.
//
// # What it lacks and costs
//
// No shared holds (Caps.Shared false) and no batched renewal. Each
// operation is one read and at most one write of the key's object (a Get,
// then an Update or Create; an Acquire whose write lost a race reads once
// more, to report the winner), plus one list of the key's waiter objects
// where the queue matters: an Acquire the key's holder does not renew, and
// Release; a waiter's refresh writes its own object, and its grant deletes
// it. List is two list calls per page (the apiserver's continue token is
// the cursor), Break a read, a list and one conditional write. The minimum
// TTL is [MinTTL]; an apiserver write costs milliseconds and each is an
// etcd write, so this store suits leader election and coarse jobs, not
// thousands of locks a second.
//
// Names: a key that is a valid object name (lowercase DNS subdomain) with
// the prefix is the Lease's name, prefix+key; another key is mapped to its
// lowercased letters, digits and dashes plus 16 hex digits of its SHA-256.
// A waiter's object is named prefix, "w-" and 32 hex digits of the SHA-256
// of its key's object name and its token.
// RBAC: the store needs get, list, watch, create, update and delete on
// leases in its namespace.
package k8slease
