// The Store: construction and the driver.Store operations.

package etcdlease

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// MinTTL is the shortest TTL the store accepts: etcd's minimum lease TTL with
// its default election timeout (1.5 × 1s, in whole seconds).
const MinTTL = 2 * time.Second

// MaxTTL is the longest TTL the store accepts: etcd's maximum lease TTL.
const MaxTTL = 9_000_000_000 * time.Second

// Store is a [driver.Store] on etcd; it is also a [driver.BatchRenewer], a
// [driver.BatchAcquirer], a [driver.BatchReleaser], a [driver.Notifier], a
// [driver.Lister] and a [driver.Breaker]. It is safe for concurrent use.
type Store struct {
	cli        *clientv3.Client
	prefix     string
	maxWaiters int

	mu      sync.Mutex
	subs    map[*subscription]bool // open subscriptions, whose queues guide Release
	leases  map[hold]int64         // the etcd lease of each key this store granted
	carries map[int64]int          // etcd lease → how many of leases are on it (see grant)
	spares  map[int64][]int64      // TTL in seconds → etcd leases that carry nothing (see spare)
	orphans []orphan               // keys a failed Release left on a lease others keep alive
}

// orphan is a key whose Release failed, left on etcd lease id, which this
// store's other holds keep alive: the next RenewMany deletes it.
type orphan struct {
	key, token string
	id         int64
}

// hold names a key held by a token.
type hold struct{ key, token string }

var (
	_ driver.Store         = (*Store)(nil)
	_ driver.BatchRenewer  = (*Store)(nil)
	_ driver.BatchAcquirer = (*Store)(nil)
	_ driver.BatchReleaser = (*Store)(nil)
	_ driver.Notifier      = (*Store)(nil)
	_ driver.Lister        = (*Store)(nil)
	_ driver.Breaker       = (*Store)(nil)
)

// New returns a Store over cli. The store does not close cli.
func New(cli *clientv3.Client, opts ...Option) (*Store, error) {
	if cli == nil {
		return nil, lease.Invalid("etcd client", "nil")
	}
	cfg := config{prefix: DefaultPrefix, maxWaiters: driver.DefaultMaxWaiters}
	for _, o := range opts {
		if o == nil {
			return nil, lease.Invalid("option", "nil option")
		}
		o(&cfg)
	}
	switch {
	case cfg.prefix == "":
		return nil, lease.Invalid("prefix", "empty: the store would watch the whole keyspace")
	case strings.IndexByte(cfg.prefix, 0) >= 0:
		return nil, lease.Invalid("prefix", "contains a NUL byte (reserved for the queues of waiters)")
	case cfg.maxWaiters < 1 || cfg.maxWaiters > driver.MaxMaxWaiters:
		return nil, lease.Invalid("max waiters", "%d is outside 1..%d", cfg.maxWaiters, driver.MaxMaxWaiters)
	}
	return &Store{cli: cli, prefix: normPrefix(cfg.prefix), maxWaiters: cfg.maxWaiters,
		subs: make(map[*subscription]bool), leases: make(map[hold]int64), carries: make(map[int64]int), spares: make(map[int64][]int64)}, nil
}

// Prefix returns the store's key prefix, which always ends in "/".
func (s *Store) Prefix() string { return s.prefix }

// Caps reports etcd's TTL range, the FIFO queue and its cap, shared holds,
// and batches of at most maxBatch requests (see the package doc).
func (s *Store) Caps() driver.Caps {
	return driver.Caps{MinTTL: MinTTL, MaxTTL: MaxTTL, FIFO: true, MaxWaiters: s.maxWaiters, FixedTTL: true, Shared: true, MaxBatch: maxBatch}
}

// maxBatch is the store's Caps.MaxBatch.
const maxBatch = 16

// Close does nothing: the store owns no resources (subscriptions are closed
// by their callers, the etcd client by its creator; its spare etcd leases,
// see spare, expire within their TTL).
func (s *Store) Close() error { return nil }

// state is one read of a key: its writer, its readers and its queue, and
// where a request's token stands.
type state struct {
	holder  *mvccpb.KeyValue // the writer's key, nil if none
	reader  *mvccpb.KeyValue // one reader's key, nil if none
	readers int              // live readers
	epoch   int64            // the read epoch's fence: its key's mod revision
	queue   int              // live entries, of both kinds
	own     *mvccpb.KeyValue // the token's entry, nil if not queued
	mine    *mvccpb.KeyValue // the token's reader key, nil if not a reader
	ahead   int              // entries before own (all of them if not queued)
	writers int              // exclusive entries before own (all if not queued)
}

// opsRead reads key's state: the writer's key, the keys of its sub-keys
// oldest first, and one reader's key with its holder.
func (s *Store) opsRead(key string) []clientv3.Op {
	return []clientv3.Op{clientv3.OpGet(s.keyPath(key)),
		clientv3.OpGet(s.subPrefix(key), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(s.subKey(key, kindReader, ""), clientv3.WithPrefix(), clientv3.WithLimit(1))}
}

// parse returns the state of r.Key that the responses to opsRead give.
func (s *Store) parse(rs []*pb.ResponseOp, r driver.Request) *state {
	st := &state{}
	if kvs := rs[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		st.holder = kvs[0]
	}
	if kvs := rs[2].GetResponseRange().GetKvs(); len(kvs) > 0 {
		st.reader = kvs[0]
	}
	ek := s.entryKey(r)
	for _, kv := range rs[1].GetResponseRange().GetKvs() {
		_, token, kind, ok := s.parseKey(kv.Key)
		switch {
		case !ok || kind == kindBroken: // another layout's, a tombstone
		case kind == kindEpoch:
			st.epoch = kv.ModRevision
		case kind == kindReader:
			st.readers++
			if token == r.Token {
				st.mine = kv
			}
		case string(kv.Key) == ek:
			st.own = kv
		case st.own == nil && kind == kindWaiter:
			st.writers++
			fallthrough
		case st.own == nil:
			st.ahead++
		}
		if kind == kindWaiter || kind == kindShared {
			st.queue++
		}
	}
	return st
}

// corrupt returns an error matching lease.ErrCorrupt if the writer's key
// holds what this package never writes: a value without "token NUL", or
// no etcd lease (a key that would never expire). The error shows the
// value's size only: a value may hold a token.
func (st state) corrupt() error {
	if kv := st.holder; kv != nil && (kv.Lease == 0 || bytes.IndexByte(kv.Value, 0) < 1) {
		return fmt.Errorf("%w: %s holds %d bytes that are not a lease's, on etcd lease %d", lease.ErrCorrupt, kv.Key, len(kv.Value), kv.Lease)
	}
	return nil
}

// heldBy returns whether kv (a lease key, or nil) carries token.
func heldBy(kv *mvccpb.KeyValue, token string) bool {
	return kv != nil && strings.HasPrefix(string(kv.Value), token+"\x00")
}

// held returns the refusal for st. For a key readers hold, one more
// request asks etcd for the time left of one reader's etcd lease: readers
// renew alike, so this is close to the last reader's time left.
func (s *Store) held(ctx context.Context, key string, st *state) error {
	e := &lease.HeldError{Key: key, Queued: st.ahead}
	if st.holder != nil {
		_, e.Holder, _ = strings.Cut(string(st.holder.Value), "\x00")
		e.Fence = uint64(st.holder.ModRevision)
	} else if st.reader != nil {
		e.Holder, e.Fence, e.Remaining = string(st.reader.Value), uint64(st.epoch), s.timeLeft(ctx, st.reader.Lease)
	}
	return e
}

// timeLeft returns the time left of etcd lease id, 0 if etcd cannot tell.
func (s *Store) timeLeft(ctx context.Context, id int64) time.Duration {
	resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil || resp.TTL <= 0 {
		return 0
	}
	return time.Duration(resp.TTL) * time.Second
}

// Acquire is AcquireMany of r alone.
func (s *Store) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	gs, errs := s.AcquireMany(ctx, []driver.Request{r})
	return gs[0], errs[0]
}

// acquired remembers id as the etcd lease of r's grant, or returns err
// wrapped (a refusal as it is).
func (s *Store) acquired(r driver.Request, id int64, err error) error {
	if err == nil {
		s.remember(hold{r.Key, r.Token}, id)
	} else if !errors.Is(err, lease.ErrHeld) && !errors.Is(err, lease.ErrQueueFull) {
		err = fmt.Errorf("etcdlease: acquire %q: %w", r.Key, err)
	}
	return err
}

// AcquireMany grants a key handed to its token as an open subscription saw
// it (FromQueue, no request); it tries the others in one transaction per
// txnRequests requests, a nested one per request that creates the key on an
// etcd lease from grant if nobody holds or awaits it, else reads it. A
// request refused there goes on from that read (see acquire).
func (s *Store) AcquireMany(ctx context.Context, rs []driver.Request) ([]driver.Grant, []error) {
	gs, errs := make([]driver.Grant, len(rs)), make([]error, len(rs))
	for lo := 0; lo < len(rs); lo += txnRequests {
		hi := min(lo+txnRequests, len(rs))
		s.acquireMany(ctx, rs[lo:hi], gs[lo:hi], errs[lo:hi])
	}
	return gs, errs
}

// acquireMany is AcquireMany of one chunk.
func (s *Store) acquireMany(ctx context.Context, rs []driver.Request, gs []driver.Grant, errs []error) {
	var try []driver.Request
	var at []int
	for i, r := range rs {
		if g, id, ok := s.handed(r); ok {
			gs[i], errs[i] = g, s.acquired(r, id, nil)
		} else {
			try, at = append(try, r), append(at, i)
		}
	}
	if len(try) == 0 {
		return
	}
	ids, err := s.grant(ctx, try)
	var resp *clientv3.TxnResponse
	if err == nil {
		ops := make([]clientv3.Op, len(try))
		for j, r := range try {
			ops[j] = clientv3.OpTxn(s.conds(r, nil), s.opsGrant(r, ids[j]), s.opsRead(r.Key))
		}
		resp, err = s.cli.Txn(ctx).Then(ops...).Commit()
	}
	if err != nil { // the leases are dropped: a key written on one dies with it, or the Client's cleanup revokes it
		for j, r := range try {
			errs[at[j]] = s.acquired(r, 0, err)
		}
		return
	}
	// A lease is spare once if no nested transaction wrote on it; a
	// request refused there goes on alone from its read.
	done := make(map[int64]bool, 1)
	for j, r := range try {
		if in := resp.Responses[j].GetResponseTxn(); in.Succeeded {
			done[ids[j]] = true
			gs[at[j]], errs[at[j]] = driver.Grant{Fence: fence(resp.Header.Revision, in.Responses, r)}, s.acquired(r, ids[j], nil)
		}
	}
	for j, r := range try {
		if !done[ids[j]] {
			done[ids[j]] = true
			s.spare(ctx, r.TTL, ids[j])
		}
	}
	for j, r := range try {
		if in := resp.Responses[j].GetResponseTxn(); !in.Succeeded {
			g, id, aerr := s.acquire(ctx, r, s.parse(in.Responses, r))
			gs[at[j]], errs[at[j]] = g, s.acquired(r, id, aerr)
		}
	}
}

// txnRequests bounds the requests of one transaction of AcquireMany or
// ReleaseMany (see the package doc).
const txnRequests = 32

// acquire returns the grant and the etcd lease of the key, from st, r.Key's
// state read by a transaction that could not create the key for r: it keeps
// r.Token's lease alive (same fence), or takes the key in a transaction
// guarded by that read (on r.Token's entry lease, or one from grant), or
// refuses, keeping r.Token's entry alive or queuing it on an etcd lease from
// grant.
func (s *Store) acquire(ctx context.Context, r driver.Request, st *state) (driver.Grant, int64, error) {
	if err := st.corrupt(); err != nil {
		return driver.Grant{}, 0, err
	}
	switch { // a retried Acquire, whoever waits (and whatever r.Shared says)
	case st.mine != nil:
		return driver.Grant{Fence: uint64(st.epoch)}, st.mine.Lease, s.keepAlive(ctx, st.mine.Lease)
	case heldBy(st.holder, r.Token):
		return driver.Grant{Fence: uint64(st.holder.ModRevision)}, st.holder.Lease, s.keepAlive(ctx, st.holder.Lease)
	}
	// A writer needs the key free and nobody ahead; a reader, no writer
	// and no exclusive waiter ahead. The transaction checks what may have
	// changed since the read: entries created since are behind own.
	free := st.holder == nil && (r.Shared && st.writers == 0 || !r.Shared && st.readers == 0 && st.ahead == 0)
	conds, ek := s.conds(r, st.own), s.entryKey(r)
	if st.own != nil {
		if !free {
			return driver.Grant{}, 0, cmp.Or(s.keepAlive(ctx, st.own.Lease), s.held(ctx, r.Key, st))
		}
		resp, err := s.cli.Txn(ctx).If(conds...).Then(append(s.opsGrant(r, st.own.Lease), clientv3.OpDelete(ek))...).Commit()
		if err == nil && !resp.Succeeded { // the read is stale: the Client looks again
			err = cmp.Or(s.keepAlive(ctx, st.own.Lease), s.held(ctx, r.Key, st))
		} else if err == nil {
			// The key lives a TTL from this keep-alive, which is after the
			// call began; if the lease expired since the transaction, so did
			// the key.
			err = s.keepAlive(ctx, st.own.Lease)
		}
		if err != nil {
			return driver.Grant{}, 0, err
		}
		return driver.Grant{Fence: fence(resp.Header.Revision, resp.Responses, r)}, st.own.Lease, nil
	}
	switch {
	case !free && !r.Queue:
		return driver.Grant{}, 0, s.held(ctx, r.Key, st)
	case !free && st.queue >= s.maxWaiters:
		return driver.Grant{}, 0, &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters}
	}
	ids, err := s.grant(ctx, []driver.Request{r})
	if err != nil {
		return driver.Grant{}, 0, err
	}
	id := ids[0]
	var refused []clientv3.Op
	if r.Queue {
		refused = []clientv3.Op{clientv3.OpPut(ek, r.Holder, clientv3.WithLease(clientv3.LeaseID(id)))}
	}
	resp, err := s.cli.Txn(ctx).If(conds...).Then(s.opsGrant(r, id)...).Else(append(refused, s.opsRead(r.Key)...)...).Commit()
	if err == nil && resp.Succeeded {
		return driver.Grant{Fence: fence(resp.Header.Revision, resp.Responses, r)}, id, nil
	}
	if err == nil {
		st = s.parse(resp.Responses[len(refused):], r)
		switch {
		case !r.Queue:
			s.spare(ctx, r.TTL, id) // the transaction only read
			return driver.Grant{}, 0, s.held(ctx, r.Key, st)
		case st.ahead < s.maxWaiters:
			return driver.Grant{}, 0, s.held(ctx, r.Key, st) // queued on lease id
		}
		err = &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters}
	}
	// Lease id carries an entry over the cap, or whatever a failed
	// transaction may have written: revoking it deletes them.
	_, _ = s.cli.Revoke(ctx, clientv3.LeaseID(id))
	return driver.Grant{}, 0, err
}

// conds returns the comparisons under which r's grant takes r.Key: no
// writer's key, and for a writer no reader's key, for a reader not its own
// (a hold's key is only ever created, as opsGrant does); with own, r's
// entry, that entry unchanged (entries created since are behind it);
// without, no exclusive waiter, and for a writer no shared waiter, for a
// reader no entry of its own.
func (s *Store) conds(r driver.Request, own *mvccpb.KeyValue) []clientv3.Cmp {
	none := func(k string) clientv3.Cmp { return clientv3.Compare(clientv3.CreateRevision(k), "=", 0) }
	c := []clientv3.Cmp{none(s.keyPath(r.Key))}
	if r.Shared {
		c = append(c, none(s.subKey(r.Key, kindReader, r.Token)))
	} else {
		c = append(c, none(s.subKey(r.Key, kindReader, "")).WithPrefix())
	}
	switch {
	case own != nil:
		return append(c, clientv3.Compare(clientv3.CreateRevision(s.entryKey(r)), "=", own.CreateRevision))
	case r.Shared:
		return append(c, none(s.subKey(r.Key, kindWaiter, "")).WithPrefix(), none(s.entryKey(r)))
	}
	return append(c, none(s.subKey(r.Key, kindWaiter, "")).WithPrefix(), none(s.subKey(r.Key, kindShared, "")).WithPrefix())
}

// opsGrant writes r's hold on etcd lease id. A writer's key deletes the
// epoch left by readers; the first reader of an epoch puts its key, whose
// mod revision is then the readers' fence until the next writer, and every
// reader reads it (see fence).
func (s *Store) opsGrant(r driver.Request, id int64) []clientv3.Op {
	if !r.Shared {
		return []clientv3.Op{clientv3.OpPut(s.keyPath(r.Key), r.Token+"\x00"+r.Holder, clientv3.WithLease(clientv3.LeaseID(id))),
			clientv3.OpDelete(s.subKey(r.Key, kindEpoch, ""))}
	}
	e := s.subKey(r.Key, kindEpoch, "")
	first := clientv3.Compare(clientv3.CreateRevision(s.subKey(r.Key, kindReader, "")), "=", 0).WithPrefix()
	return []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{first}, []clientv3.Op{clientv3.OpPut(e, "")}, nil),
		clientv3.OpPut(s.subKey(r.Key, kindReader, r.Token), r.Holder, clientv3.WithLease(clientv3.LeaseID(id))),
		clientv3.OpGet(e)}
}

// fence returns the fence of the hold that ops, the responses of opsGrant
// in a transaction at revision rev, granted: rev for a writer, the epoch's
// for a reader.
func fence(rev int64, ops []*pb.ResponseOp, r driver.Request) uint64 {
	if !r.Shared {
		return uint64(rev)
	}
	if kvs := ops[2].GetResponseRange().GetKvs(); len(kvs) > 0 {
		return uint64(kvs[0].ModRevision)
	}
	return 0
}

// maxSpares bounds the spare etcd leases a store keeps per TTL.
const maxSpares = 1024

// grant returns an etcd lease for each of rs, of its TTL in whole seconds
// rounded up, one for all the requests of a TTL (so the keys granted in one
// batch share it, and one keep-alive renews them all): a spare of that TTL
// (see spare) if a keep-alive, pipelined with the others', finds it alive,
// else a new one. A server whose minimum lease TTL is longer would keep
// keys longer than the Client believes: its lease is revoked and the TTL
// refused.
func (s *Store) grant(ctx context.Context, rs []driver.Request) ([]int64, error) {
	of := make(map[int64]int64, 1) // TTL in seconds → its lease
	s.mu.Lock()
	for _, r := range rs {
		secs := seconds(r.TTL)
		if _, ok := of[secs]; ok {
			continue
		}
		of[secs] = 0
		if pool := s.spares[secs]; len(pool) > 0 {
			of[secs], s.spares[secs] = pool[len(pool)-1], pool[:len(pool)-1]
		}
	}
	s.mu.Unlock()
	var spares []int64
	for _, id := range of {
		if id != 0 {
			spares = append(spares, id)
		}
	}
	ttls, _ := s.keepAlives(ctx, spares)
	ids := make([]int64, len(rs))
	for i, r := range rs {
		secs := seconds(r.TTL)
		if ttls[of[secs]] != secs {
			resp, err := s.cli.Grant(ctx, secs)
			if err == nil && resp.TTL > secs {
				_, _ = s.cli.Revoke(ctx, resp.ID)
				err = lease.Invalid("ttl", "%v is below the etcd server's minimum lease TTL %ds", r.TTL, resp.TTL)
			}
			if err != nil { // the leases taken expire unused
				return nil, err
			}
			of[secs], ttls[int64(resp.ID)] = int64(resp.ID), secs
		}
		ids[i] = of[secs]
	}
	return ids, nil
}

// remember records id as the etcd lease of h, which this store granted.
func (s *Store) remember(h hold, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.leases[h]; ok {
		if old == id {
			return
		}
		s.drop(old)
	}
	s.leases[h] = id
	s.carries[id]++
}

// spare keeps etcd lease id, of ttl, which carries no hold now, for the
// store's next grants, up to maxSpares per TTL; beyond, or if it still
// carries an orphan, it revokes it.
func (s *Store) spare(ctx context.Context, ttl time.Duration, id int64) {
	secs := seconds(ttl)
	s.mu.Lock()
	n := len(s.orphans)
	s.orphans = slices.DeleteFunc(s.orphans, func(o orphan) bool { return o.id == id })
	keep := len(s.spares[secs]) < maxSpares && n == len(s.orphans)
	if keep {
		s.spares[secs] = append(s.spares[secs], id)
	}
	s.mu.Unlock()
	if !keep {
		_, _ = s.cli.Revoke(ctx, clientv3.LeaseID(id))
	}
}

// seconds returns ttl in whole seconds, rounded up.
func seconds(ttl time.Duration) int64 { return int64((ttl + time.Second - 1) / time.Second) }

// keepAlive refreshes etcd lease id once; a lease that is gone (expired or
// revoked) gives an error matching lease.ErrNotHeld.
func (s *Store) keepAlive(ctx context.Context, id int64) error {
	ttls, err := s.keepAlives(ctx, []int64{id})
	if err == nil && ttls[id] <= 0 {
		err = errExpired
	}
	return err
}

// errExpired is the refusal of a key whose etcd lease is gone.
var errExpired = fmt.Errorf("%w: its etcd lease expired", lease.ErrNotHeld)

// keepAliveWindow bounds the keep-alives sent and not yet answered on a
// stream: their requests (about 25 bytes each) and responses (about 60)
// then fit the 64 KiB HTTP/2 flow-control windows of a stream, so that
// neither side ever waits for the other to read, without a goroutine.
const keepAliveWindow = 512

// keepAlives refreshes the etcd leases ids on one LeaseKeepAlive stream,
// pipelined: a new request goes out as each response comes in, with
// keepAliveWindow unanswered at most. It returns the TTL etcd answered for
// each lease (0: the lease is gone), never a nil map, and the error that
// ended the stream (the leases it did not answer have no TTL then).
func (s *Store) keepAlives(ctx context.Context, ids []int64) (map[int64]int64, error) {
	ttls := make(map[int64]int64, len(ids))
	if len(ids) == 0 {
		return ttls, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := clientv3.RetryLeaseClient(s.cli).LeaseKeepAlive(ctx)
	if err != nil {
		return ttls, clientv3.ContextError(ctx, err)
	}
	for sent, got := 0, 0; got < len(ids); got++ {
		for ; sent < len(ids) && sent-got < keepAliveWindow; sent++ {
			if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: ids[sent]}); err != nil {
				return ttls, fmt.Errorf("keep-alive: %w", clientv3.ContextError(ctx, err))
			}
		}
		resp, err := stream.Recv()
		if err != nil {
			return ttls, fmt.Errorf("keep-alive: %w", clientv3.ContextError(ctx, err))
		}
		ttls[resp.ID] = resp.TTL
	}
	_ = stream.CloseSend()
	return ttls, nil
}

// Renew is RenewMany of r alone.
func (s *Store) Renew(ctx context.Context, r driver.Request) error {
	return s.RenewMany(ctx, []driver.Request{r})[0]
}

// RenewMany keeps the etcd leases of the keys alive, pipelined on one
// stream, without reading the keys (see the package doc); the key and
// reader key of a token this store did not grant are read first (either
// kind, whatever r.Shared says), and a token whose hold is gone is looked
// up among the tombstones of Break.
func (s *Store) RenewMany(ctx context.Context, rs []driver.Request) []error {
	errs, of, ids := make([]error, len(rs)), make([]int64, len(rs)), make([]int64, 0, len(rs))
	for i, r := range rs {
		s.mu.Lock()
		of[i] = s.leases[hold{r.Key, r.Token}]
		s.mu.Unlock()
		if of[i] == 0 { // not granted by this store: read the key and r.Token's reader key
			resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.keyPath(r.Key)), clientv3.OpGet(s.subKey(r.Key, kindReader, r.Token)),
				clientv3.OpGet(s.subKey(r.Key, kindBroken, r.Token), clientv3.WithCountOnly())).Commit()
			if errs[i] = err; err == nil {
				writer, reader := resp.Responses[0].GetResponseRange().GetKvs(), resp.Responses[1].GetResponseRange().GetKvs()
				switch {
				case len(reader) > 0:
					of[i] = reader[0].Lease
				case len(writer) > 0 && heldBy(writer[0], r.Token):
					of[i] = writer[0].Lease
				case resp.Responses[2].GetResponseRange().GetCount() > 0:
					errs[i] = lease.ErrBroken
				default:
					errs[i] = lease.ErrNotHeld
				}
			}
		}
		if errs[i] == nil {
			ids = append(ids, of[i])
		}
	}
	s.deleteOrphans(ctx)
	slices.Sort(ids)
	ttls, err := s.keepAlives(ctx, slices.Compact(ids))
	for i, r := range rs {
		if ttl, ok := ttls[of[i]]; errs[i] == nil && !ok {
			errs[i] = cmp.Or(err, errors.New("no keep-alive answer"))
		} else if errs[i] == nil && ttl <= 0 {
			errs[i] = s.expired(ctx, r)
			s.forget(r)
		}
		if errs[i] != nil {
			errs[i] = fmt.Errorf("etcdlease: renew %q: %w", r.Key, errs[i])
		}
	}
	return errs
}

// maxOrphans bounds the orphans one RenewMany deletes (two nested
// transactions each, within etcd's --max-txn-ops).
const maxOrphans = 32

// deleteOrphans deletes, in one transaction, the keys of up to maxOrphans
// orphans whose etcd lease this store still keeps alive; the others expire
// with their lease. A failed transaction leaves them for the next call.
func (s *Store) deleteOrphans(ctx context.Context) {
	s.mu.Lock()
	s.orphans = slices.DeleteFunc(s.orphans, func(o orphan) bool { return s.carries[o.id] == 0 })
	batch := s.orphans[:min(len(s.orphans), maxOrphans)]
	s.orphans = slices.Clone(s.orphans[len(batch):])
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	if _, err := s.cli.Txn(ctx).Then(s.opsOrphans(batch)...).Commit(); err != nil {
		s.mu.Lock()
		s.orphans = append(s.orphans, batch...)
		s.mu.Unlock()
	}
}

// expired returns the refusal of r, whose etcd lease is gone: ErrBroken
// while a tombstone of r.Token lives (see Break), else errExpired.
func (s *Store) expired(ctx context.Context, r driver.Request) error {
	resp, err := s.cli.Get(ctx, s.subKey(r.Key, kindBroken, r.Token), clientv3.WithCountOnly())
	if err == nil && resp.Count > 0 {
		return lease.ErrBroken
	}
	return errExpired
}

// forget drops the etcd lease remembered for r, and returns it (0 if none)
// and whether it carries other holds of this store's.
func (s *Store) forget(r driver.Request) (id int64, shared bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.leases[hold{r.Key, r.Token}]
	if !ok {
		return 0, false
	}
	delete(s.leases, hold{r.Key, r.Token})
	return id, s.drop(id) > 0
}

// drop counts one hold less on etcd lease id, and returns how many are
// left; s.mu is held.
func (s *Store) drop(id int64) int {
	n := s.carries[id] - 1
	if n <= 0 {
		delete(s.carries, id)
	} else {
		s.carries[id] = n
	}
	return n
}

// Release is ReleaseMany of r alone.
func (s *Store) Release(ctx context.Context, r driver.Request) error {
	return s.ReleaseMany(ctx, []driver.Request{r})[0]
}

// ReleaseMany releases each request in a nested transaction, one
// transaction per txnRequests requests: it deletes the key if it carries
// r.Token, or r.Token's reader key (whatever r.Shared says), and r.Token's
// queue entry. When an open subscription knows an exclusive waiter first in
// the key's queue, it hands the key over instead, if the key still carries
// r.Token and that entry is unchanged: the key then carries the waiter's
// token and holder on its entry's etcd lease. The etcd lease of a hold this
// store granted, which then carries nothing, is kept as a spare (see
// spare); the others it deleted from are revoked.
func (s *Store) ReleaseMany(ctx context.Context, rs []driver.Request) []error {
	errs := make([]error, len(rs))
	for lo := 0; lo < len(rs); lo += txnRequests {
		hi := min(lo+txnRequests, len(rs))
		s.releaseMany(ctx, rs[lo:hi], errs[lo:hi])
	}
	return errs
}

// releaseMany is ReleaseMany of one chunk.
func (s *Store) releaseMany(ctx context.Context, rs []driver.Request, errs []error) {
	mine, shared, handing := make([]int64, len(rs)), make([]bool, len(rs)), make([]bool, len(rs))
	ops, plain := make([]clientv3.Op, len(rs)), make([]clientv3.Op, len(rs))
	for i, r := range rs {
		mine[i], shared[i] = s.forget(r)
		ops[i], plain[i], handing[i] = s.opsRelease(r, mine[i])
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) { // a waiter's etcd lease just expired
		clear(handing)
		resp, err = s.cli.Txn(ctx).Then(plain...).Commit()
	}
	for i, r := range rs {
		if errs[i] = err; err == nil {
			errs[i] = s.released(ctx, r, mine[i], !shared[i], handing[i], resp.Responses[i].GetResponseTxn())
		} else if shared[i] {
			s.mu.Lock()
			s.orphans = append(s.orphans, orphan{r.Key, r.Token, mine[i]})
			s.mu.Unlock()
		}
		if errs[i] != nil {
			errs[i] = fmt.Errorf("etcdlease: release %q: %w", r.Key, errs[i])
		}
	}
}

// opsRelease returns the nested transaction that releases r, the one that
// releases it without a hand-off, and whether the first hands off. A hold
// this store granted on etcd lease mine is known by that lease (which
// carries nothing else), and its token has no queue entry.
func (s *Store) opsRelease(r driver.Request, mine int64) (op, plain clientv3.Op, handing bool) {
	k, rk := s.keyPath(r.Key), s.subKey(r.Key, kindReader, r.Token)
	var leave []clientv3.Op
	is := ours(k, r.Token)
	if mine != 0 {
		is = []clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(k), "=", mine)}
	} else {
		leave = []clientv3.Op{clientv3.OpDelete(s.subKey(r.Key, kindWaiter, r.Token), clientv3.WithPrevKV()),
			clientv3.OpDelete(s.subKey(r.Key, kindShared, r.Token), clientv3.WithPrevKV())}
	}
	release := append([]clientv3.Op{
		clientv3.OpTxn(is, []clientv3.Op{clientv3.OpDelete(k, clientv3.WithPrevKV())}, nil),
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(rk), ">", 0)}, []clientv3.Op{clientv3.OpDelete(rk, clientv3.WithPrevKV())}, nil),
	}, leave...)
	plain = clientv3.OpTxn(nil, release, nil)
	token, e := s.next(r.Key, r.Token)
	if token == "" {
		return plain, plain, false
	}
	hk := s.subKey(r.Key, kindWaiter, token)
	return clientv3.OpTxn(append(is, clientv3.Compare(clientv3.CreateRevision(hk), "=", e.rev)),
		append([]clientv3.Op{clientv3.OpPut(k, token+"\x00"+e.holder, clientv3.WithLease(clientv3.LeaseID(e.lease)), clientv3.WithPrevKV()),
			clientv3.OpDelete(hk)}, leave...), release), plain, true
}

// released returns lease.ErrNotHeld unless in, the response of r's nested
// transaction (handing: a hand-off), released r's hold. It keeps the hold's
// etcd lease as a spare if this store granted it (mine) and no other hold
// of this store's is on it (last); it revokes the etcd lease of a deleted
// queue entry, and that of another store's hold if it carries nothing now
// (holds granted together share one).
func (s *Store) released(ctx context.Context, r driver.Request, mine int64, last, handing bool, in *pb.TxnResponse) error {
	held := handing && in.Succeeded
	var kvs []*mvccpb.KeyValue
	for _, op := range in.Responses {
		if t := op.GetResponseTxn(); t != nil {
			held = held || t.Succeeded
			for _, op := range t.Responses {
				kvs = append(kvs, op.GetResponseDeleteRange().GetPrevKvs()...)
			}
		} else if kv := op.GetResponsePut().GetPrevKv(); kv != nil {
			kvs = append(kvs, kv) // handed over: the key's former etcd lease carries nothing
		} else {
			kvs = append(kvs, op.GetResponseDeleteRange().GetPrevKvs()...)
		}
	}
	for _, kv := range kvs {
		if kv.Lease == mine && mine != 0 {
			if last {
				s.spare(ctx, r.TTL, mine)
			}
			continue
		}
		if _, _, kind, _ := s.parseKey(kv.Key); kind == 0 || kind == kindReader {
			if ttl, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease), clientv3.WithAttachedKeys()); err != nil || len(ttl.Keys) > 0 {
				continue // gone, or kept alive for its other keys
			}
		}
		if _, err := s.cli.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return err
		}
	}
	if !held {
		return lease.ErrNotHeld
	}
	return nil
}

// opsOrphans returns the nested transactions that delete the keys of
// orphans that are still on their etcd leases.
func (s *Store) opsOrphans(orphans []orphan) []clientv3.Op {
	ops := make([]clientv3.Op, 0, 2*len(orphans))
	for _, o := range orphans {
		for _, k := range []string{s.keyPath(o.key), s.subKey(o.key, kindReader, o.token)} {
			ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(k), "=", o.id)}, []clientv3.Op{clientv3.OpDelete(k)}, nil))
		}
	}
	return ops
}

// handed returns the grant of a key handed to r.Token, a writer, as an open
// subscription last saw it (only r.Token's own Release or the expiry of
// that etcd lease end such a hold): the key is on r.Token's entry lease,
// kept alive by its last refused attempt, so the TTL runs from then.
func (s *Store) handed(r driver.Request) (driver.Grant, int64, bool) {
	if r.Shared {
		return driver.Grant{}, 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		sub.mu.Lock()
		h, ok := sub.holders[r.Key]
		sub.mu.Unlock()
		if ok && h.holder == r.Token {
			return driver.Grant{Fence: uint64(h.rev), FromQueue: true}, h.lease, true
		}
	}
	return driver.Grant{}, 0, false
}

// next returns the oldest entry of key's queue other than token's, as an
// open subscription last saw it, if it is an exclusive waiter's ("" if
// none).
func (s *Store) next(key, token string) (string, entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		if t, e := sub.head(key); t != token && e.shared {
			return "", entry{}
		} else if t != token {
			return t, e
		}
	}
	return "", entry{}
}

// ours returns the comparisons that hold when key's value carries token:
// such values lie between token and token+"\x01" (tokens have no NUL), no
// other does, and a missing key's value compares false.
func ours(key, token string) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(key), ">", token),
		clientv3.Compare(clientv3.Value(key), "<", token+"\x01"),
	}
}

// Inspect reports who holds key, with one read; Remaining is 0 for a
// writer, and for readers one reader's time left (see held), which costs
// one more request.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	resp, err := s.cli.Txn(ctx).Then(s.opsRead(key)...).Commit()
	if err != nil {
		return driver.Info{}, fmt.Errorf("etcdlease: inspect %q: %w", key, err)
	}
	st := s.parse(resp.Responses, driver.Request{Key: key})
	if err := st.corrupt(); err != nil {
		return driver.Info{}, fmt.Errorf("etcdlease: inspect %q: %w", key, err)
	}
	switch {
	case st.holder != nil:
		_, holder, _ := strings.Cut(string(st.holder.Value), "\x00")
		return driver.Info{Key: key, Held: true, Holder: holder, Fence: uint64(st.holder.ModRevision)}, nil
	case st.reader != nil:
		return driver.Info{Key: key, Held: true, Shared: true, Readers: st.readers, Holder: string(st.reader.Value), Fence: uint64(st.epoch),
			Remaining: s.timeLeft(ctx, st.reader.Lease)}, nil
	}
	return driver.Info{Key: key}, nil
}
