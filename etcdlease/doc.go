// Package etcdlease is a [driver.Store] backed by etcd v3, through a
// go.etcd.io/etcd/client/v3 [clientv3.Client]: a single node or a cluster.
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"etcd1:2379", "etcd2:2379", "etcd3:2379"}})
//	if err != nil { ... }
//	defer cli.Close()
//	store, err := etcdlease.New(cli, etcdlease.WithPrefix("/myapp/leases/"))
//	if err != nil { ... }
//	client, err := lease.New(store, lease.WithTTL(10*time.Second))
//
// The store never closes the etcd client it was given. TLS and
// authentication are the clientv3.Config's (TLS, Username, Password).
//
// # Layout and guarantees
//
// A lease key K is the etcd key Prefix+esc(K) (default prefix "/leasekit/"; a
// prefix always ends in "/"), where esc percent-escapes '%' and '/' so that K
// is one path segment: the namespaces "/app/" and "/app/sub/" never share a
// lease. Its value is the holder's token, a NUL byte and the holder's
// identity. The keys one batch of acquisitions grants (see Batches) share
// an etcd lease per TTL (rounded up to whole seconds; a server whose
// minimum lease TTL is longer makes Acquire fail with lease.ErrInvalid),
// and it carries nothing else: etcd deletes them when the holder stops
// renewing. Release deletes the key; once a lease's last key is released,
// it carries nothing and the store keeps it as a spare for its next
// acquisitions of that TTL (up to 1024 per TTL; it revokes the rest): a
// batch takes a spare that a keep-alive finds alive, else it grants a new
// lease. A key whose Release failed while other keys keep its lease alive
// is deleted by the next RenewMany. Renew keeps the key's lease alive without reading the key
// (the store remembers the lease of each key it granted; a token it did not
// grant is checked with one read), and [Store.RenewMany] pipelines the
// keep-alives of many leases on one stream: one round trip per renewal
// round, one keep-alive per etcd lease. So a key deleted behind the store's back is still renewed until its
// holder stops: to take a lease away by hand, break it (Client.ForceRelease,
// below) or revoke its etcd lease (etcdctl lease revoke). The fence is the revision that last put
// the key (its creation, or a hand-off): etcd's revision is cluster-wide,
// strictly increasing and durable, so fences hold across leader changes and
// restarts.
//
// # FIFO queue
//
// A waiter (Acquire with Request.Queue that cannot take the key) puts the
// entry Prefix+esc(K)+"\x00q/"+token on an etcd lease of its own, with its
// TTL; its later attempts keep that lease alive, so the entry of a dead
// waiter expires within a TTL. Entries are ordered by create revision, as
// with etcd's concurrency.Mutex. A free key is created only in a transaction
// that checks the queue is empty, or that the caller's entry is its oldest
// (the key then moves onto the entry's etcd lease and the entry is deleted).
// Each key's queue holds at most [WithMaxWaiters] entries.
//
// A [Store.Subscribe] watch announces deleted keys and queue entries, naming
// the oldest waiter as Next if it is exclusive. While a subscription is open, Release hands a
// key straight to that waiter in its one transaction, guarded by the key
// still carrying the releaser's token and the entry being unchanged: the key
// then carries the waiter's token on its entry's etcd lease, and the
// waiter's next Acquire, through a store whose subscription saw the hand-off,
// sends nothing: the TTL runs from the keep-alive of its last refused attempt
// (driver.Grant.FromQueue). The releaser's etcd lease becomes a spare, as
// after a release.
//
// # Batches
//
// [Store.AcquireMany], and Acquire as the batch of one, sends up to 32
// requests in one transaction, a nested one per request that creates the
// key on the request's etcd lease if nobody holds, reads or awaits it, else
// reads it; the requests of a TTL share one etcd lease, a spare that a
// keep-alive finds alive or else a new one. A
// request refused in the transaction goes on alone from that
// read (a retry, a queued token, a held key). [Store.ReleaseMany], and
// Release, sends up to 32 releases, each a transaction nested in one. So with spares at hand a batch costs a
// keep-alive round trip and one Raft write to acquire, and one Raft write
// to release. etcd refuses a transaction of more than --max-txn-ops
// operations (default 128, counting a nested transaction's against what its
// parent leaves) or --max-request-bytes (default 1.5 MiB): 32 nested
// transactions of at most 5 operations, naming keys of up to 1.5 KiB
// escaped, stay within both.
//
// # Shared holds
//
// A reader (driver.Request.Shared) holds the key Prefix+esc(K)+"\x00r/"+token,
// valued with its holder, on an etcd lease of its own; a shared waiter's
// entry is Prefix+esc(K)+"\x00s/"+token. A reader's key is created in a
// transaction that checks that no writer's key and no exclusive waiter's
// entry exists (a queued reader: none ahead of its entry); a writer's, that
// no reader's key and no entry exists (a queued writer: none ahead). The
// first reader of a read epoch, finding no reader's key, also puts the epoch
// key Prefix+esc(K)+"\x00e/", empty and on no etcd lease, in the same
// transaction; every reader's fence is that key's mod revision, so readers
// that join live readers share their fence and a later writer's revision is
// larger. A writer's grant deletes the epoch key. The key is announced when
// its last reader's key goes, naming the head waiter only if it is
// exclusive; Release hands the key over only from a writer to an exclusive
// waiter. A refusal or Inspect of a key readers hold asks etcd for one
// reader's time left (one more request).
//
// # Listing and breaking
//
// [Store.List] reads the etcd keys under Prefix+esc(prefix) in key order,
// limit etcd keys a page (a page that ends inside a key's keys reads their
// rest), every page at the revision of the first, which the cursor carries:
// a listing is one view of the store, if etcd keeps that revision until it
// ends (a compaction meanwhile fails it: list again). Each holder's
// Remaining costs a TimeToLive request; a waiter's is 0.
//
// [Store.Break] reads the key and its holds' time left, then in one
// transaction, guarded by the holds being unchanged since the read (else it
// fails, to be retried), deletes the writer's key or every reader's, which
// the watch announces as a release, keeps the queue, and puts the tombstone
// Prefix+esc(K)+"\x00b/"+token per evicted token, valued with its etcd
// lease's ID, on a new etcd lease that outlives the holds by a second. Then
// it revokes the evicted etcd leases: the evicted holder's next keep-alive
// fails, and one read finds the tombstone (lease.ErrBroken). The keys its
// store granted in the same batch, on the same lease, go too: their
// renewals fail with lease.ErrNotHeld. A Break cut
// off before its revokes leaves the evicted holder renewing an etcd lease
// that carries nothing; breaking the key again revokes what its tombstones
// name.
//
// Keys written by earlier versions (fences in the value, keys unescaped) are
// not understood: do not share a prefix with them. The design is explained
// in docs/design.md ("etcd").
package etcdlease
