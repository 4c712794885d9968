// Package zklease is a lease.Store on Apache ZooKeeper (3.5 or later; tested
// with 3.8), over github.com/go-zookeeper/zk.
//
// # Layout
//
// Key k lives under the container node <root>/<escaped k> (root "/leasekit"
// by default, see WithRoot; the key is percent-escaped into one path
// segment). Each acquisition creates an ephemeral sequential holder node
// "_c_<token>-<sequence>" under it, with the holder, token and TTL as JSON
// data. The lowest live node holds the key; every other acquirer deletes its
// own node at once and gets a *lease.HeldError (the Client's waiting and
// fairness live in the core, not in a ZooKeeper queue).
//
// # Fences
//
// The fence is the holder node's czxid, the zxid of the transaction that
// created it: zxids are totally ordered across the ensemble and never reused,
// so fences grow across holders, keys, sessions and leader changes.
//
// # Expiry: the session and the TTL
//
// A holder node is ephemeral, so ZooKeeper deletes it when its session ends
// (a crash, a partition longer than the session timeout, Close). A Store made
// by Dial closes the Lost channel of its grants when the session expires, and
// the Client reports the leases lost at once. The lease TTL may not exceed
// the negotiated session timeout (Limits.MaxTTL), so the session can never
// outlive the Client's local deadline.
//
// The library keeps the session alive by itself, though, so a live process
// that stopped renewing one lease would hold it forever. Each lease therefore
// also has a TTL in the store: a renewal is a version-checked write of the
// holder node, and the node expires TTL after its last write (its mtime, the
// ZooKeeper leader's clock). An acquirer that finds the lowest node expired
// deletes it (version-checked, so a renewal racing with it wins) and takes
// over; a renewal that finds its TTL already ran out reports
// lease.ErrNotHeld. The acquirer compares the node's mtime with its own
// node's creation time, both stamped by the leader: no client clock is
// involved. A leader change between two servers with skewed wall clocks
// shifts this expiry by the skew; the session bound is unaffected.
//
// # Round trips
//
// Acquire of a free key: 2 (a multi that creates our node and touches the
// parent, which yields the fence and the server's time; a listing). Acquire
// of a held key: 4 (plus 1 for the release watch while a Client waits).
// Renew: 1 (a version-checked write). RenewMany: 1 multi for all leases.
// Release: 1 (a delete). Inspect: 3 (one a write to learn the server's time).
// Renew and Release of a lease this Store did not grant first find the node
// by its token (+1 or +2).
//
// # Connections and contexts
//
// go-zookeeper v1.0.4 calls take no context: a Store checks ctx before each
// call, and a call in flight ends with the library's own timeouts (two
// thirds of the session timeout without an answer, or a connection loss).
// During a disconnection calls fail or wait for the reconnect; renewals then
// fail and the Client's local deadline runs, while the session (and the
// node) survives a reconnect within the session timeout.
//
// # Announcements
//
// The Store is a lease.Notifier built from one-shot watches (v1.0.4 has no
// persistent recursive watch): while a subscription is open, an Acquire that
// finds a key held sets a child watch on the holder's node, which fires only
// when that node is deleted, and Next returns the key then.
package zklease
