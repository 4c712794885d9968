// Package natslease is a [driver.Store] on a NATS JetStream key-value
// bucket, through github.com/nats-io/nats.go/jetstream.
//
//	nc, err := nats.Connect("nats://127.0.0.1:4222")
//	if err != nil { ... }
//	defer nc.Close()
//	js, err := jetstream.New(nc)
//	if err != nil { ... }
//	store, err := natslease.New(ctx, js, natslease.WithBucket("leases"))
//	if err != nil { ... }
//	client, err := lease.New(store, lease.WithTTL(10*time.Second))
//
// The store never closes the connection. TLS and authentication are the
// connection's (nats.UserInfo, nats.Token, nats.Secure, ...).
//
// # Layout and guarantees
//
// New creates the bucket if it is missing: one revision per key
// (History 1), file storage, no MaxAge. A lease key K is the KV key
// NS.esc(K) (namespace [DefaultNamespace], [WithNamespace]), where esc keeps
// letters, digits, '-', '_' and '/' and writes other bytes as =HH. Its value
// is a small JSON record: the holder's token, identity and TTL, the fence
// and the tombstones of broken holds. Every write is a compare-and-set on
// the key's last revision (Create, or Update with the revision read), so a
// read-then-write by one client never overwrites another's.
//
// The fence is the revision (stream sequence) that granted the hold: it is
// strictly increasing per bucket, and it survives restarts because the
// newest message of every key, delete markers included, is kept.
//
// Expiry is judged by the server's clock: a hold ends TTL after the server
// time stamped on the write that granted or last renewed it. NATS servers
// before 2.11 have no per-key TTL and no request that returns the time, so
// the store reads the clock by writing the KV key "_clock" and reading back
// the time the server stamped on it: operations that must judge a holder
// (Acquire of a held key, Renew, Release, Inspect, List, Break) cost two
// more round trips. A server clock that steps forward ends holds early, as
// for any store on a server's clock; in a cluster the stream leader stamps
// both the records and the clock, so a change of leader between machines
// whose clocks disagree moves expiries by the difference.
//
// # Wake-ups, listing, breaking
//
// [Store.Subscribe] watches the namespace (an ordered consumer) and
// announces deletes and records left without a holder. [Store.List] reads
// the namespace's keys by direct gets in stream order. [Store.Break]
// replaces the record by one without a holder that keeps a tombstone for the
// evicted token until its hold would have expired: its Renew then fails with
// lease.ErrBroken.
//
// The store has no FIFO queue of waiters and no shared holds.
package natslease
