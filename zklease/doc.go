// Package zklease is a lease.Store on Apache ZooKeeper (3.5 or later; tested
// with 3.8), over github.com/go-zookeeper/zk.
//
// # Layout
//
// Key k lives under the container node <root>/<escaped k> (root "/leasekit"
// by default, see WithRoot; the key is percent-escaped into one path
// segment). Each acquisition creates an ephemeral sequential holder node
// "_c_<token>-<sequence>" under it, with the holder, token and TTL as JSON
// data. The lowest live node holds the key.
//
// # The FIFO queue of waiters
//
// The Store is a lease.Queuer: the key's nodes, in sequence order, are its
// queue. An Acquire with Request.Queue that cannot be granted keeps its node
// as the token's queue entry (marked "waiting" in its data) instead of
// deleting it; each later Acquire of the token refreshes the entry (a
// version-checked write: the entry expires TTL after its last refresh, its
// mtime, judged by ZooKeeper's clock like a holder's TTL) and grants the key
// once the entry is the lowest node, with the entry's czxid as the fence.
// While the lowest node is a waiting entry the key is free but reserved for
// that waiter: every other Acquire, with or without Request.Queue, gets a
// *lease.HeldError without a holder, and Inspect reports the key free. An
// Acquire without Request.Queue that is not the lowest deletes its node at
// once, as before. Release deletes the token's node, holder or entry (an
// entry's Release reports lease.ErrNotHeld). An entry whose owner stopped
// refreshing it is deleted by the next acquirer that finds it lowest, so a
// dead waiter delays the others by at most one TTL; the session's end (a
// crash, Close) deletes a process's nodes at once. HeldError.Queued counts
// the nodes between the lowest (the holder's, or itself if it is a waiting
// entry) and ours; entries are not read one by one, so an entry that has
// expired but is not yet lowest is still counted. A key keeps at most
// [WithMaxWaiters] entries behind its lowest node (default
// lease.DefaultMaxWaiters): a new node with more before it is deleted at
// once and its waiter gets a *lease.QueueFullError.
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
// that stopped renewing one lease would hold it forever. Nor would the
// session's pings be proof enough to renew by (as zk.Lock and Curator's
// locks do): in an ensemble a follower answers pings itself, and one cut
// off from the leader goes on answering them for syncLimit × tickTime while
// the leader, which alone expires sessions, ends the session and deletes
// its nodes; only a request the leader orders, such as a write, proves the
// node is still there. Each lease therefore also has a TTL in the store: a renewal is a version-checked write of the
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
// of a held key: 4 (plus 1 for the release watch while a Client waits, 2 for
// a queued waiter two or more places back in a Store made by Dial: see
// Announcements); its last step deletes our node, or with Request.Queue
// marks it waiting. A queued token's later Acquire: 2 when granted (a
// listing, the write that makes the entry the holder; none when the event
// callback saw its only predecessor go), 4 while it waits (a listing, the
// refresh, a read of the lowest node, plus the watches), or 2 for a
// Client's entry written less than TTL/16 ago (a listing and the watch: no
// refresh, no read).
// Renew: 1 (a version-checked write). RenewMany: as few multis of
// version-checked writes as ZooKeeper's packet limit allows. A renewal must
// write each holder node (its mtime is the TTL's origin, see above; the
// session's own heartbeat cannot renew one lease and not another), and
// ZooKeeper refuses a packet over jute.maxbuffer (0xfffff bytes, 1 MiB, by
// default) by closing the connection. A renewal costs 21 + len(path) +
// len(data) request bytes (its jute encoding in a multi) and 77 response
// bytes (a Stat); a multi is filled up to 1 MiB − 64 KiB (the margin covers
// the request's wrapping when a follower forwards it to the leader). The
// floor is therefore ⌈leases × bytes per renewal / 1 MiB⌉ multis per renewal
// interval: with the benchmark's keys (paths of about 96 bytes, data of 77:
// about 194 bytes per renewal), 10,000 leases are 1.94 MB, i.e. 2 multis
// (measured: 2 multis plus the library's session ping, 3 writes per 2 s
// interval, down from 10.9 with multis capped at 1000 operations). Long keys
// or holder names raise it proportionally.
// Release: 1 (a delete). Inspect: 3 (one a write to learn the server's time).
// Renew and Release of a lease (or queue entry) this Store did not make
// first find the node by its token and read it (+2).
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
// # Errors and tokens
//
// A holder node's name holds its token, the secret that renews and releases
// the lease. Errors name nodes with the token shortened to its first 8
// characters and "…" ("_c_0123abcd…-0000000007"), as the Client's logs
// show tokens, so the errors the Client logs (during an outage, say) never
// reveal a token, ours or another holder's. The node names and data on the
// server do hold it: protect them with an ACL (see Access control).
//
// # Access control
//
// Without credentials a Store creates its nodes open to anyone
// (world:anyone, all permissions): any client of the ensemble can read the
// tokens, delete a holder's node and take the key. A Store made by Dial with
// WithAuth (a zk://user:pass@ URL) creates every node, the root and its
// missing ancestors included, with the creator ACL, zk.AuthACL(zk.PermAll):
// only the identity it logged in as (every store with the same user and
// password) may read, change or delete them, or create nodes beside them,
// as Curator does with an ACLProvider. WithACL sets the ACL explicitly and
// wins over both defaults.
//
// ZooKeeper ACLs are not inherited, and an existing node keeps its own. A
// root that lets anyone create under it lets anyone make a key's node
// first, with an ACL of their choosing, and then list (the names hold the
// tokens) and delete the holder nodes under it. So Dial with WithAuth and
// no WithACL refuses a root that already exists and grants world:anyone
// more than read (ErrOpenRoot; one made by an earlier anonymous store, say):
// fix its ACL (setAcl) or use another root. Deleting a node is permitted
// by its parent's ACL, so the root's parent must not let others delete and
// re-create the root: ZooKeeper's "/" is open to anyone by default, so put
// the root under a node you have locked down. Key nodes that already exist
// are not checked: after locking down a root that anonymous stores used,
// their key nodes go once they are empty (container nodes).
//
// # Announcements
//
// The Store is a lease.Notifier built from one-shot watches (v1.0.4 has no
// persistent recursive watch): while a subscription is open, a queued
// waiter's Acquire sets a child watch on its predecessor's node only (the
// holder's, or the entry queued just ahead), which fires only when that node
// is deleted, and Next returns the key then. So a release wakes the next
// waiter and no other (no herd), and so does the departure of a waiter ahead
// (its Release, its entry's expiry, its session's end). An Acquire without
// Request.Queue that finds the key held watches the lowest node. A Store made
// by Dial sees every watch event in its connection's event callback, and its
// subscriptions push announcements from there (lease.Pusher): the Client's
// waiter is woken by the library's receiving goroutine itself. When the
// deleted node was the only one ahead of a queued entry (the entry was
// second at its last listing), the entry is the lowest now (sequential nodes
// are never created below an existing one), and the Store grants the
// entry's next Acquire without a request: a hand-off between two
// contenders is the release and the watch event alone. A queued waiter two
// or more places back also watches the node before its predecessor (one
// more request): when that node goes, its predecessor may have become the
// lowest; the waiter is woken (an announcement naming it with Moved set,
// which is not a release: Next skips it), its next Acquire lists the nodes
// and, finding itself second, expects the hand-off. The listing is thus made while its
// predecessor holds the key, and the release that follows hands the key over
// with no request on the hand-off's path in a queue of any length.
package zklease
