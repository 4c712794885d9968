// Package redislease is a [driver.Store] backed by Redis through any go-redis
// [redis.UniversalClient]: a single node, a Cluster (*redis.ClusterClient) or
// a Sentinel-managed primary (redis.NewFailoverClient).
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	defer rdb.Close()
//	store, err := redislease.New(rdb, redislease.WithPrefix("myapp:lease:"))
//	if err != nil { ... }
//	client, err := lease.New(store)
//
// The store never closes the client it was given. TLS, ACL users and
// passwords are configured on the go-redis client; the store never formats
// the client's options into errors.
//
// Each operation is one Lua script, one EVALSHA round trip. [Store.AcquireMany],
// [Store.ReleaseMany] and [Store.RenewMany] run up to 1,000 requests per
// EVALSHA, each request with its own result (a corrupt key fails its own
// request only), all in one pipeline: one round trip and one script call for
// the batch a Client's goroutines send together (100 EVALSHAs in one round
// trip for 100,000 renewals). A batch of acquisitions or releases passes
// each request's lease key and token only, after the arguments its requests
// share (requests that differ go in separate EVALSHAs), and its script
// derives the lease's other keys, which share its slot. Through a Cluster or Ring client, whose scripts
// may not span slots, they pipeline one EVALSHA per request (one round trip
// per node the batch's keys live on). For prefix
// P and key K (esc percent-escapes '%', '{' and '}', so the Cluster hash tag
// is exactly the escaped key and all keys of K share one slot):
//
//   - P{esc(K)}: the lease, a string "token NUL fence NUL holder" with the
//     lease's TTL (rounded up to whole milliseconds);
//   - P{esc(K)}:fence: the last fence granted for K, kept forever;
//   - P{esc(K)}:q and :qx: K's FIFO queue of waiters, two sorted sets of
//     tokens scored by arrival and by entry expiry (server ms), and :qc, a
//     hash of the waiters whose store listens to the store's id; they expire
//     with their last entry;
//   - P{esc(K)}:r and :rh: K's readers (shared holds), a sorted set of
//     tokens scored by expiry (server ms) and a hash token -> holder,
//     expiring with the last reader; the lease string is then
//     "NUL fence NUL holder" (no token), with the epoch's fence and the
//     holder and expiry of the reader that expires last;
//   - P{esc(K)}:b: the tombstones of holds a Break evicted, a sorted set of
//     tokens scored by the evicted hold's expiry (server ms), expiring with
//     the last;
//   - P + "released": the namespace's Pub/Sub channel. A release publishes K
//     (in a batch, only if the channel has subscribers: PUBSUB NUMSUB),
//     followed by NUL and the first live waiter's token when one is queued;
//     when that waiter's store listens (has an open subscription), on that
//     store's own channel P + "released:" + its id instead, so only the
//     clients that can take K wake.
//
// A free key is granted only to the first live waiter (or anyone when the
// queue is empty); a waiter's entry expires TTL after its last refresh, and a
// queue holds at most [WithMaxWaiters] live waiters. An announcement only
// wakes a waiter, whose own Acquire is then granted by the script: nobody is
// granted anything on the word of a message that anyone allowed to PUBLISH
// can forge. Keys may not contain NUL (lease.ErrInvalid), the separator of
// announcements. Every client of a namespace receives each release that
// nobody listening waits for: use prefixes to partition busy namespaces.
//
// Readers share a key while no writer holds it and no exclusive waiter is
// queued ahead of them (a shared waiter's queue member is its token after a
// NUL). The first reader of an epoch takes a new fence, as a writer does;
// the others get the epoch's. The key is announced when its writer or last
// reader leaves; the announcement names the head waiter only if it is
// exclusive.
//
// [Store.List] finds keys by their fence counters with SCAN (on a Cluster, on
// every master) and reads each with one script, all in one pipeline: it costs
// in proportion to the whole database, not to the live keys. A Ring cannot
// list. [Store.Break] evicts in one script and tombstones the evicted tokens,
// whose renewal then fails with lease.ErrBroken. See docs/stores.md.
//
// A fence is max(last+1, the server clock in µs), so fences keep increasing
// even when Redis loses the counter (a restart without persistence), unless
// the server's clock also went back.
//
// Redis replication is asynchronous: after a failover the new primary may not
// know a lease, and grant it again. Fences, checked by the protected
// resource, keep the resource safe; [WithReplicaAck] narrows the window.
// See docs/design.md ("The Redis store") for the reasons behind this design.
package redislease
