// Package etcdlease is a [lease.Store] backed by etcd v3, through a
// go.etcd.io/etcd/client/v3 [clientv3.Client]: a single node or a cluster.
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"etcd1:2379", "etcd2:2379", "etcd3:2379"}})
//	if err != nil { ... }
//	defer cli.Close()
//	store, err := etcdlease.New(cli, etcdlease.WithPrefix("/myapp/leases/"))
//	if err != nil { ... }
//	defer store.Close()
//	client, err := lease.New(store, lease.WithTTL(10*time.Second))
//
// Use one *Store per lease.Client: the store keeps the etcd leases of that
// client (see below). The store never closes the etcd client it was given.
//
// # Data layout
//
// A lease key K is the etcd key Prefix+esc(K) (default prefix "/leasekit/",
// see [WithPrefix]; a prefix always ends in "/"), where esc percent-escapes
// '%' ("%25") and '/' ("%2F") so that K is exactly one path segment: the
// namespace "/app/" with key "sub/x" ("/app/sub%2Fx") and the namespace
// "/app/sub/" with key "x" ("/app/sub/x") are different leases, and a store
// ignores the keys of a nested namespace that its prefix watch also sees.
// The value is the holder's token, a NUL byte and the holder's identity. The key is attached to an etcd lease, so etcd deletes
// it when the lease expires. The fence is the key's create revision: etcd's
// revision counter is cluster-wide, strictly increasing and durable, and a
// key that is deleted and created again gets a new, larger create revision.
// A key handed over by a Release (see "Hand-off" below) keeps its create
// revision, so its value carries the fence: token, two NUL bytes, the fence
// in decimal, a NUL byte and the holder's identity. That fence is the
// previous holder's plus one, which is at most the revision of the hand-off
// (every fence is at most the revision that granted it), so fences grow
// strictly across hand-offs and later creations alike.
//
// # Upgrading from the layout without escaping
//
// Before this layout, K was stored at Prefix+K and a prefix was used as
// given. Keys without '/' or '%' under a prefix that ends in "/" are laid
// out as before; a key with '/' or '%', or any key under a prefix given
// without a trailing "/", now lives at another etcd key. An old and a new
// client therefore do not see each other's leases of such keys: during a
// rolling upgrade, do not let both versions share a namespace (stop the old
// holders first, or give the new version its own prefix).
//
// # etcd leases, TTLs and batched renewal
//
// The store grants etcd leases lazily, one per distinct TTL, and attaches
// every key acquired with that TTL to it; a client that uses one TTL has one
// etcd lease for all of its keys. etcd lease TTLs are whole seconds, so a
// TTL is rounded UP to the next second (2.1s becomes 3s): etcd may keep a key
// up to a second longer than asked, never shorter. The Client's own deadline
// uses the requested TTL, which is never longer, so it stays safe.
//
// etcd silently raises a lease TTL below its minimum, 1.5 election timeouts
// (with the default 1s election timeout, 1.5s, rounded up to 2s). The store
// declares [MinTTL] (2s) as its minimum (lease.Limiter), and if a server
// still grants more than the TTL asked for (a larger election timeout), the
// acquisition fails with an error matching lease.ErrInvalid instead of
// silently holding the key longer than the Client believes.
//
// # FIFO queue of waiters
//
// The store is a lease.Queuer: a freed key goes to the waiter that has
// waited longest, as with etcd's own concurrency.Mutex, ordered by create
// revision. A waiter (Acquire with Request.Queue that cannot get the key)
// puts an entry Prefix+esc(K)+"\x00q/"+token (value: its holder identity).
// Lease keys and prefixes contain no NUL byte (the store rejects them with
// lease.ErrInvalid, as the Client already does for keys), so an entry never
// collides with a lease key or a nested namespace's key, and the prefix
// Prefix+esc(K)+"\x00q/" holds exactly K's queue, which one ranged Get
// sorted by create revision lists in arrival order.
//
// Each entry is on an etcd lease of its own, granted with the TTL of the
// attempt that queued it (rounded up to seconds) and kept alive by each
// later attempt of the waiter (one LeaseKeepAlive, skipped while the entry
// was refreshed less than a quarter TTL ago: it then lives three quarters
// of a TTL more, and the Client tries again within a third): an entry
// expires about one TTL after its waiter's last attempt, on etcd's clock like every lease of the store, and etcd deletes
// it. Entries are not put on the store's shared etcd lease of that TTL:
// that lease lives as long as the process renews anything with that TTL, so
// the entry of a waiter that stopped trying (a give-up whose Release failed,
// a waiter with another TTL) would block the key for everyone while its
// process holds other leases. etcd transactions have no server clock to
// compare a stored expiry with, so an etcd lease per entry is the one sound
// server-side expiry. An entry's lease, left without keys when the waiter
// acquires or gives up (or when a key handed to it leaves it), is kept by
// the store as a spare for its next new entry with that TTL while it lives
// (up to 16 per TTL; spares.go): a new entry costs a LeaseGrant only when
// there is no spare, and a spare refreshed less than a quarter TTL ago lets
// the refused Acquire put the entry in its own transaction. Close revokes
// the entry leases the store wrote and its spares, so a closed client's
// waiters leave their queues at once.
//
// Acquire grants a free key only if no live entry is older than the
// token's own (if the token is not queued: only if the queue is empty); the
// check is part of the acquiring transaction: the create revision of every
// key under the queue prefix must be at least the token's entry's (a range
// comparison), and the transaction deletes the token's entry as it creates
// the lease key. The store remembers the create revisions of the entries it
// wrote, so the head of the queue normally takes the key in that one
// transaction; when it does not know (the entry was written through another
// Store), the failed transaction's read supplies it and a second
// transaction takes the key. HeldError.Queued counts the entries ahead of
// the token (all of them if it is not queued); a free key with entries
// ahead is refused with a HeldError that has no holder. Release deletes the
// token's entry in the same transaction as the key (a waiter that gives up
// gets lease.ErrNotHeld, having held nothing). Inspect ignores the queue.
//
// A key's queue keeps at most [WithMaxWaiters] entries (default
// lease.DefaultMaxWaiters): the transaction that puts a new entry counts the
// queue before it, and an entry with that many before it is deleted at once
// and its waiter gets a *lease.QueueFullError.
//
// # Hand-off
//
// A Release whose store has an open subscription (a Client subscribes once
// one of its acquisitions had to wait, and keeps the subscription) knows,
// from the subscription's mirror of the queues, which waiter is first in the
// key's queue. If it also knows the fence its token holds (the store granted
// or renewed the key), its transaction hands the key over instead of
// deleting it, on condition that the key still carries the releaser's token
// and that waiter's entry is still first and on the etcd lease the mirror
// saw: the key then carries the waiter's token and the fence plus one, on
// the etcd lease of the waiter's entry, and the entry is deleted. When the
// condition fails (a stale mirror), the same transaction releases as
// above. A waiter the subscription knows only from its first read (keys
// only, without the waiter's holder identity) is not handed the key. A
// hand-off is announced to that waiter alone, and its store, if it
// wrote the entry (and refreshed it less than half a TTL ago), grants the
// waiter's next Acquire from the watch event, with no round trip: the
// grant's Since counts from the entry's last refresh, and the first
// renewal moves the key to the store's own etcd lease (one more
// transaction, with the fence kept). A waiter's Acquire through another
// store finds the key carrying its token and moves it the same way. etcd's
// concurrency.Mutex hands over with a read by the next holder (its key is
// already first once the previous one is deleted); this hands over with
// none. A key handed to a waiter that has just given up is released by its
// give-up (the Client's Release of a waiter's token), and one handed to a
// waiter whose process died expires with the entry's etcd lease, one TTL
// after that waiter's last attempt, as its entry would have blocked the
// queue for that long.
//
// # Round trips
//
//   - Acquire: a refresh of the etcd lease (LeaseKeepAlive, or LeaseGrant
//     for the first key of a TTL) then one transaction: create the key if
//     its create revision is 0 and no waiter is queued ahead, else read it
//     if its value holds our token (an idempotent retry, or a key handed
//     to us; one more transaction moves it to our etcd lease if it is on
//     another), else read the holder and the queue. The refresh is skipped while the lease was
//     refreshed less than half a TTL ago (as it is while the heartbeat
//     keeps any key with that TTL): the key then lives at least the TTL
//     from that refresh, which the grant's Since tells the Client, so the
//     local deadline and the renewals count from it. 1 round trip (2 with
//     the refresh), also for the head of a queue taking a freed key (one
//     more if its entry was written by another Store). A refused Acquire
//     with Request.Queue adds a keep-alive of the entry's etcd lease, or,
//     to queue a new waiter, a LeaseGrant and a Put.
//   - Renew and RenewMany (lease.BatchRenewer): one LeaseKeepAlive per
//     distinct etcd lease of the batch (normally one): 1 round trip per
//     renewal interval for any number of keys with one TTL (measured: 1.0
//     per interval for 10,000 leases). Keys the renewal watch cannot vouch
//     for (see below) are also read, up to 64 per read-only transaction, to
//     check that each is still ours and attached to that etcd lease: every
//     key at the store's first renewal, and later only keys the watch saw
//     change. A key found attached to another etcd lease (it was
//     re-acquired by the same token through another store) is re-attached
//     to ours by one more transaction.
//   - Release: one transaction that deletes the key only if its value still
//     holds our token — never by key alone — and our queue entry if any,
//     or hands the key to the first waiter (see "Hand-off").
//   - Acquire of a key handed to the waiter's token: no round trip when the
//     store saw the hand-off (see "Hand-off"), else the one transaction
//     above and one more to move the key to the store's etcd lease.
//   - Inspect: one read. Inspect and HeldError report the holder and fence
//     but not the remaining TTL (Remaining is 0): etcd reports lease TTLs
//     in whole seconds only, and it would cost a round trip.
//   - Acquire, Renew, RenewMany and Release cost one more transaction when
//     an earlier Release of the store failed (see below), none otherwise.
//
// # Renewal watch
//
// The etcd lease keeps every key on it alive, so a renewal must only learn
// of keys that changed while the lease stayed alive: deleted (a Release
// with the token through another store, an operator's delete), re-created
// by another holder, or moved to another etcd lease by the same token's
// acquisition through another store. Rather than reading every key at
// every renewal, the store records, for each key it granted or read, the
// token, the create revision, the etcd lease and the revision it was seen
// at, and keeps one watch on its prefix (its own clientv3 Watcher and
// stream, requiring a leader, started from the current revision at the
// first renewal that reads keys; Close ends it). RenewMany first takes,
// without blocking, what the watch delivered: an event on a recorded key
// after its revision marks it for a read at this renewal, which reports it
// lost (gone, or another token's) or re-attaches it — unless the event is a
// put that leaves it ours on the same etcd lease. Keys not marked are
// renewed by the keep-alive alone.
//
// The store relies on the watch only while it is current. After a round
// whose keep-alive saw a revision beyond what the watch has confirmed, the
// store asks the watch for a progress notice (one message on the watch's
// stream, not waited for; none on an idle cluster, whose revision does not
// move), and the next round vouches for keys only if the notice arrived:
// every event up to at least the revision the previous round saw has then
// been read. A watch that ends, is cancelled (compaction, loss of its
// member's leader) or leaves a progress request unanswered for a round is
// closed, and the next round reads every key and starts a new one. A key
// changed behind the store's back is thus reported at the first renewal
// after the watch delivered the change (normally the next one), and at the
// latest at the second renewal after it, where reading every key reported
// it at the next one.
//
// # Failed releases
//
// A key lives as long as its etcd lease, and the store's etcd lease for a
// TTL is shared: acquisitions refresh it (unless it was refreshed less than
// half a TTL ago), and so does every renewal of any key on it. A key whose Release failed (a timeout during a leader
// election, a cancelled ctx, a lost response), or that the Client gave up on
// (its clean-up after an acquisition with an unknown outcome, or after a
// local loss, is a Release too), would therefore never expire while the
// process keeps using the store: its own waiters would refresh the etcd
// lease before each attempt and find the key held by the token it no longer
// uses, and so would everyone else's.
//
// So the store remembers the key and token of every Release that failed
// with an error other than lease.ErrNotHeld (an orphan), and deletes the
// orphans at the start of its next Acquire, Renew, RenewMany or Release —
// before the keep-alive that would extend them — in one transaction (up to
// 64 orphans) that deletes each key only if it still carries the orphan's
// token, never by key alone, together with that token's queue entry. An
// orphan is forgotten once that transaction succeeds (the key deleted, or
// already gone or taken over), when its etcd lease is found gone, or on
// Close (which revokes the etcd leases); a failed clean-up is retried by the
// next operation, which goes on regardless. An Acquire or Release with the
// orphan's own token takes it back (a retried Release then deletes the key
// itself). A key whose release failed thus outlives it only until the
// store's next operation that reaches etcd (or, if the store is idle, until
// its etcd lease expires); the deletion is announced to waiters like a
// release.
//
// # Loss of the etcd lease
//
// When a refresh finds the etcd lease gone (it expired because renewals
// stopped for longer than the TTL, or it was revoked), the store drops it,
// returns an error matching lease.ErrNotHeld for every key on it and closes
// the Grant.Lost channel it returned for each of them, so the Client reports
// every lease on it lost at once. The next Acquire grants a new etcd lease.
//
// # Waiting
//
// [Store.Subscribe] (lease.Notifier) opens one etcd watch on the prefix.
// Next announces a key when it is deleted (a release, or an expiry: etcd
// deletes the keys of an expired lease) and when an entry of its queue is
// deleted (a waiter gave up, was closed or expired, so the next waiter may
// now be first) — except when the same transaction created the key (the
// entry's waiter acquired it; the others have nothing new to try). An
// entry that leaves while the key is held is announced too (the watch does
// not know whether it was the head or whether the key is held): its
// waiters try once more and are refused. The watch requires a leader, so a
// member cut off from the cluster ends the subscription and the Client
// falls back to the holder's TTL until it subscribes again.
//
// # Failure behaviour
//
// A leader change does not lose leases: etcd extends every lease on the new
// leader, and renewals resume as soon as the client reaches it (the etcd
// client retries on the other endpoints). A client cut off from the quorum
// cannot renew; its Client reports the leases lost at the local deadline
// (last successful renewal send time + TTL - drift margin), which is before
// etcd can expire the etcd lease (etcd counts the TTL from when it received
// that renewal, and a new leader extends it further), so before anyone else
// can acquire the keys.
package etcdlease
