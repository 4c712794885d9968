// Package redislease is a [lease.Store] backed by Redis, through a
// go-redis [redis.UniversalClient]: a single node (*redis.Client), a Redis
// Cluster (*redis.ClusterClient) or a Sentinel-managed primary
// (redis.NewFailoverClient) all work.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	defer rdb.Close()
//	store, err := redislease.New(rdb, redislease.WithPrefix("myapp:lease:"))
//	if err != nil { ... }
//	client, err := lease.New(store)
//
// The store never closes the Redis client it was given; [Store.Close] is a
// no-op and the caller closes the client after the lease Client.
//
// # Authentication and TLS
//
// Credentials and TLS are configured on the go-redis client, not here:
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:      "redis.example.com:6380",
//		Username:  "leases", // a Redis 6+ ACL user
//		Password:  os.Getenv("REDIS_PASSWORD"),
//		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, ServerName: "redis.example.com"},
//	})
//
// The same fields exist on redis.ClusterOptions, redis.FailoverOptions and
// redis.UniversalOptions. This package never formats the client's options
// into errors or logs, so the password is not printed.
//
// # Data layout
//
// For a namespace prefix P (default "lease:", see [WithPrefix]) and a lease
// key K, the store uses:
//
//   - P + "{" + esc(K) + "}": the lease, a string holding the token, a NUL
//     byte, the fence (decimal), a NUL byte and the holder name, written
//     with its TTL (SET PX) and extended by PEXPIRE. Tokens may not contain
//     NUL (lease.ErrInvalid), so the token is everything before the first
//     NUL; the holder, the rest, may hold any bytes. (One string costs the
//     server one call per grant where a hash took HSET and PEXPIRE; an
//     older leasekit's leases were hashes, which this one answers with a
//     WRONGTYPE error, never a second grant, until they expire.)
//   - P + "{" + esc(K) + "}:fence": the last fence granted for K, with no
//     TTL. It survives releases and expiries, so it stays in Redis for every
//     key ever leased (a few dozen bytes per distinct key).
//   - P + "{" + esc(K) + "}:q" and P + "{" + esc(K) + "}:qx": K's FIFO
//     queue of waiters (see below), two sorted sets of waiting tokens scored
//     by arrival order and by entry expiry, and P + "{" + esc(K) + "}:qd", a
//     hash of the TTL, store identifier and holder of each waiter whose
//     store listens (for the hand-off, below). They exist only while
//     waiters are queued.
//   - P + "released": the Pub/Sub channel on which a release publishes K,
//     followed by a NUL byte and the token of the first live waiter when
//     one is queued, so that only that waiter looks (lease.Announcer).
//   - P + "released:" + a store's random identifier: that store's own
//     channel. A release that hands K to one of its waiters (below)
//     publishes there alone, so the other clients of the namespace do not
//     wake. A Subscription listens to both.
//
// esc percent-escapes '%', '{' and '}' ("%25", "%7B", "%7D"), so the Redis
// Cluster hash tag is always exactly the escaped key (never empty, since
// empty keys are rejected): a lease, its fence counter and its queue
// always live in the same cluster slot, which the Lua scripts require. The prefix must
// not contain '{' or '}'.
//
// There is ONE release channel per namespace: every subscribed client of a
// namespace receives every release in it (except the hand-offs, which go to
// the receiving store's own channel) and ignores the keys nobody waits
// for. Use distinct prefixes to keep unrelated, busy namespaces apart.
// Expiries are not announced; the lease Client waits for the holder's TTL.
// A *redis.Ring also works, but its shards do not forward Pub/Sub messages
// to each other, so a subscriber only hears releases of keys on the shard of
// the channel; other waiters fall back to waiting for the holder's TTL.
//
// # FIFO queue of waiters
//
// The store is a [lease.Queuer]: a freed key goes to the waiter that has
// waited longest, not to whoever asks first (the releaser included). The
// lease Client's Acquire queues its token (Request.Queue) and refreshes the
// entry on each attempt; TryAcquire is never queued but is refused, with a
// *lease.HeldError whose Queued counts the waiters, while waiters are queued
// on a free key. A key's queue holds at most [WithMaxWaiters] live waiters
// (default lease.DefaultMaxWaiters): the acquire script counts the queue and
// adds to it atomically, so the cap is exact, and a new token beyond it gets
// a *lease.QueueFullError.
//
// The queue of K is two sorted sets with the waiting tokens as members. In
// ":q" the score is the arrival order: the server clock (TIME) in
// microseconds when the token was first queued, or one more than the last
// waiter's score if that is not larger, so order never goes back, even if the
// clock does; a refresh keeps the score, hence the place. In ":qx" the score
// is when the entry expires, in milliseconds of the same server clock as the
// lease expiries: now + TTL, moved forward by each refresh. Acquire first drops
// the expired entries (a waiter that died delays the others by at most its
// TTL); then it counts the live entries ahead of the caller, grants the key
// only if it is free and that count is zero (removing the caller's entry),
// and otherwise queues or refreshes the caller if asked. Whenever an entry is
// added or refreshed, both sets are given a PEXPIRE equal to the latest entry
// expiry, so a queue whose waiters all died vanishes by itself; a queue whose
// last entry leaves is deleted at once (Redis removes empty sorted sets).
// Release also removes the token's entry; if that removed an entry while the
// key is free (a waiter gave up) it publishes K, so the next waiter looks
// again. All of this happens inside the acquire and release scripts: still
// one EVALSHA, one round trip, per operation.
//
// # Hand-off
//
// A waiter queued through a store that has an open Subscription (the lease
// Client's waiters always do) records its TTL, its store's identifier and
// its holder in ":qd". A
// Release by the holder then hands K to the first live waiter in the same
// script, when that waiter has such a record: K carries the waiter's token,
// holder and a new fence (granted as Acquire grants one), with the waiter's
// TTL, and the waiter leaves the queue; the announcement names the waiter
// and goes to the waiter's store's own channel only. It only wakes the
// waiter: its Acquire asks the server, which grants it the fence (the token
// already holds K). The store never grants on the word of an announcement,
// which anyone allowed to PUBLISH can send (see docs/design.md, "A
// notification wakes; it never grants"). A waiter that gives up releases K,
// which hands it on; a waiter that died holds K until its TTL runs out, like
// a dead holder. A waiter queued through a store that does not listen is not
// handed K: the release frees K, reserved for it.
//
// Keys may hold any bytes except NUL (the announcement separates the key
// from the token with it): the Store refuses a key with a NUL byte with
// lease.ErrInvalid.
//
// # Operations
//
// Acquire, Renew, Release and Inspect are each one Lua script, run with
// EVALSHA (falling back to EVAL once when the server does not have the
// script cached): one round trip and one atomic server-side operation.
// RenewMany ([lease.BatchRenewer]) sends one EVALSHA per lease in a single
// pipeline: one round trip on a single node, one per node on a Cluster.
// TTLs are rounded up to whole milliseconds (PEXPIRE), never down.
//
// # Fencing tokens
//
// A new holder's fence is max(last+1, now), where last is the key's fence
// counter and now is the Redis server's clock (TIME) in microseconds since
// the Unix epoch. The counter alone makes fences strictly increasing while
// Redis keeps its data; the clock keeps them increasing when the counter is
// lost, as after a restart without persistence or a failover to a replica
// that had not received it yet. The one thing that can break the guarantee
// is such a loss combined with the server's wall clock being behind the
// last fence (the clock stepped backwards across the restart, or a promoted
// replica's clock lags the old primary's by more than the time that passed).
// Fences stay below 2^53, where Lua numbers are exact.
//
// # Caveats
//
// Redis replication is asynchronous: after a failover the new primary may
// not know a lease the old one granted, and grant it again. Leases are
// therefore advisory across failovers; fences (checked by the protected
// resource) are what keeps two holders from both writing. [WithReplicaAck]
// sends WAIT after every write, which narrows that window but does not close
// it.
package redislease
