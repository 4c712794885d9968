// Package zklease is a driver.Store on Apache ZooKeeper (3.5 or later;
// tested with 3.8), over github.com/go-zookeeper/zk, built as ZooKeeper's
// lock recipe (Curator's InterProcessMutex).
//
// Key k is the container node <root>/<k percent-escaped into one segment>
// (root "/leasekit" by default, see WithRoot). Each token that acquires or
// queues for k has one ephemeral sequential node "_c_<token>-<sequence>"
// under it, whose data holds the token, the holder and the TTL. The nodes,
// in sequence order, are the key's FIFO queue: the lowest live node holds
// the key, the others wait behind it. A queued waiter's node holds the key
// once the nodes ahead are gone: its next Acquire lists the children and
// writes nothing (driver.Grant.FromQueue).
//
// Fences: the holder node's czxid. Zxids are totally ordered across the
// ensemble and never reused, and a node is created after every node ahead
// of it, so fences grow across holders, sessions and restarts.
//
// Shared holds (Curator's InterProcessReadWriteLock): a reader's node is
// "_c_<token>-r-<sequence>", and a reader is blocked only by a writer's
// node ahead of it, so the lowest node holds the key with, if it is a
// reader's, the readers right behind it. A reader that holds with others
// joins their read epoch: its fence is the lowest fence among them, which
// it records in its node's data ("epoch") by a write that checks that
// fence's node still exists, so the epoch outlives its first reader; a
// reader alone takes its czxid. A refused reader watches the nearest
// writer ahead (Announcement.Next empty); a writer behind readers, its
// predecessor. The first waiter, or a try, reads every reader that holds.
//
// Expiry, twice. The nodes are ephemeral: ZooKeeper deletes them when their
// session ends (a crash, a partition longer than the session timeout,
// Close), and a Store made by Dial closes its grants' Lost channels then.
// And a node that is not written for its TTL has expired: its mtime plus
// its TTL is judged against the time of the judge's own write, both
// stamped by the ZooKeeper leader, never a client's clock. An acquirer that
// finds the lowest node expired deletes it (version-checked, so a renewal
// racing with it wins). So a live process that stopped renewing one lease,
// or a waiter that stopped asking, delays the others by at most one TTL.
// A node whose data this package did not write (not its JSON, no TTL) is
// never judged: operations that read it fail with lease.ErrCorrupt until it
// is deleted by hand.
// The TTL may not exceed the negotiated session timeout (Caps.MaxTTL).
//
// Announcements: while a subscription is open, an Acquire that finds the
// key held sets a child watch, which fires only on the node's deletion: a
// queued waiter on its predecessor (so a release wakes the next waiter and
// no other, and Announcement.Next names it), another try on the lowest
// node. A release that no Acquire waits for is not announced.
// go-zookeeper v1.0.4 has no persistent watches.
//
// Round trips: Acquire of a free key 1 (a multi that creates the node and
// touches the parent, yielding the fence, the server's time and the
// parent's number of children: one, the new node, and it holds the key; 3
// more if the parent is missing: the multi fails, the parent is created
// and the multi sent again), of a held key 4 (+1 watch; + a read per further reader), or
// queued 3 (2 behind another waiter; +1 watch); a reader joining others
// 3, + a read of each reader up to the first that records the epoch
// (usually 4 or 5); a queued waiter's turn 1 (a listing; a reader's
// joining others, 2 + those reads); Renew 1; RenewMany as few multis as
// ZooKeeper's 1 MiB packet limit allows; Release 1; Inspect 3 (+1 per
// further reader). AcquireMany and ReleaseMany (driver.BatchAcquirer,
// driver.BatchReleaser; up to 64 requests) create, or delete, the nodes of
// all their requests in one multi: a batch of free keys is 1 round trip;
// parents missing from the failed op on are created one by one (the multi
// failed as a whole), then the multi is sent again; a key with other nodes
// goes on as Acquire does from the listing, and the requests of a failed
// multi one by one. go-zookeeper's calls take no context: a Store checks
// ctx before each operation.
//
// Listing and breaking (driver.Lister, driver.Breaker): List reads the
// root's children once per listing and keeps them for its pages; a page
// writes the root's data (empty) for the server's time, then reads each
// key's nodes, so it costs a listing per key and a read per node. Break
// deletes the holders' nodes in one multi, each at the version it read,
// with a persistent tombstone "_b_<token>-<until>" per evicted token (until:
// the leader's time its hold would have expired); Renew of a token whose
// node is gone answers lease.ErrBroken while its tombstone is there. The
// first List or Break of the key after until deletes the tombstone.
//
// Security: the node names hold the tokens, so errors name nodes with the
// token shortened ("_c_0123abcd…-0000000007"). Without credentials the
// nodes are open to anyone (world:anyone). Dial with WithAuth (a
// zk://user:pass@ URL) and no WithACL creates every node with the creator
// ACL, and refuses a root open to anyone (ErrOpenRoot); see
// docs/SECURITY.md. The design's reasons are in docs/design.md.
package zklease
