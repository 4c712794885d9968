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
//     taken over.
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
// # What it lacks and costs
//
// No FIFO queue and no shared holds (Caps.FIFO and Caps.Shared are false):
// waiters race, woken by announcements. [Store.Subscribe] watches the
// store's Lease objects (label leasekit.io/store) and announces every change
// that leaves one free. Each operation is one read and at most one write to
// the apiserver (a Get, then an Update or Create; an Acquire whose write
// lost a race reads once more, to report the winner); List is one list call
// per page (the apiserver's continue token is the cursor), Break one read
// and one conditional write. The minimum TTL is [MinTTL]; an apiserver
// write costs milliseconds and each is an etcd write, so this store suits
// leader election and coarse jobs, not thousands of locks a second.
//
// Names: a key that is a valid object name (lowercase DNS subdomain) with
// the prefix is the Lease's name, prefix+key; another key is mapped to its
// lowercased letters, digits and dashes plus 16 hex digits of its SHA-256.
// RBAC: the store needs get, list, watch, create and update on leases in
// its namespace.
package k8slease
