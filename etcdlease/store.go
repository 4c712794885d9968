// The Store: construction, limits, Acquire, Release, Inspect, Close and the
// encoding of key values.

package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
)

// MinTTL is the shortest TTL the store accepts: etcd's minimum lease TTL with
// its default election timeout (1.5 × 1s, in whole seconds).
const MinTTL = 2 * time.Second

// MaxTTL is the longest TTL the store accepts: etcd's maximum lease TTL
// (9,000,000,000 seconds).
const MaxTTL = 9_000_000_000 * time.Second

// ErrClosed is returned by the operations of a closed Store.
var ErrClosed = errors.New("etcdlease: store closed")

// Store is a [lease.Store] on etcd. It also implements [lease.BatchRenewer],
// [lease.Notifier], [lease.Limiter] and [lease.Queuer]. It is safe for concurrent use; give
// each lease.Client its own Store, since the store keeps that client's etcd
// leases.
type Store struct {
	cli    *clientv3.Client
	prefix string

	maxWaiters int // WithMaxWaiters: the cap of each key's queue

	mu      sync.Mutex
	leases  map[int64]*etcdLease    // the live etcd lease of each TTL (seconds)
	busy    map[int64]chan struct{} // TTLs whose lease is being granted or refreshed
	subs    map[*subscription]bool  // open subscriptions, closed by Close
	queued  map[string]queued       // queue entries this store wrote, by etcd key (queue.go)
	orphans map[orphanID]*etcdLease // keys whose Release failed, and their etcd lease (orphans.go)
	held    map[string]held         // keys granted or checked, by lease key (vouch.go)
	handed  map[string]handed       // hand-offs the subscriptions saw, by lease key (handoff.go)
	spares  map[int64][]spare       // etcd leases that carry nothing, by TTL in seconds (spares.go)
	carried map[string]spare        // entry leases that carry a key handed to the store, by lease key
	watch   *renewWatch             // the renewal watch, nil if none (vouch.go)
	closed  bool
}

// Compile-time checks of the interfaces the Store implements.
var (
	_ lease.Store        = (*Store)(nil)
	_ lease.BatchRenewer = (*Store)(nil)
	_ lease.Notifier     = (*Store)(nil)
	_ lease.Limiter      = (*Store)(nil)
)

// New returns a Store over cli. The store does not close cli.
func New(cli *clientv3.Client, opts ...Option) (*Store, error) {
	if cli == nil {
		return nil, lease.Invalid("etcd client", "nil")
	}
	cfg := config{prefix: DefaultPrefix, maxWaiters: lease.DefaultMaxWaiters}
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
	}
	if err := lease.CheckMaxWaiters(cfg.maxWaiters); err != nil {
		return nil, err
	}
	return &Store{
		cli:     cli,
		prefix:  normPrefix(cfg.prefix),
		leases:  make(map[int64]*etcdLease),
		busy:    make(map[int64]chan struct{}),
		subs:    make(map[*subscription]bool),
		queued:  make(map[string]queued),
		orphans: make(map[orphanID]*etcdLease),
		held:    make(map[string]held),
		handed:  make(map[string]handed),
		spares:  make(map[int64][]spare),
		carried: make(map[string]spare),

		maxWaiters: cfg.maxWaiters,
	}, nil
}

// Prefix returns the store's key prefix, which always ends in "/".
func (s *Store) Prefix() string { return s.prefix }

// Limits reports the store's TTL range: [MinTTL, MaxTTL].
func (s *Store) Limits() lease.Limits {
	return lease.Limits{MinTTL: MinTTL, MaxTTL: MaxTTL}
}

// ttlSeconds rounds ttl up to whole seconds, as etcd lease TTLs are.
func ttlSeconds(ttl time.Duration) int64 {
	return int64((ttl + time.Second - 1) / time.Second)
}

// check validates the fields of r the store relies on.
func check(r lease.Request, needTTL bool) error {
	switch {
	case r.Key == "":
		return lease.Invalid("key", "empty")
	case strings.IndexByte(r.Key, 0) >= 0:
		return lease.Invalid("key", "contains a NUL byte (reserved for the queues of waiters)")
	case r.Token == "":
		return lease.Invalid("token", "empty")
	case strings.IndexByte(r.Token, 0) >= 0:
		return lease.Invalid("token", "contains a NUL byte")
	case needTTL && r.TTL < MinTTL:
		return lease.Invalid("ttl", "%v is below etcd's minimum lease TTL %v", r.TTL, MinTTL)
	case needTTL && r.TTL > MaxTTL:
		return lease.Invalid("ttl", "%v is above etcd's maximum lease TTL %v", r.TTL, MaxTTL)
	}
	return nil
}

// encode returns the value stored for a holder: token, NUL, holder.
func encode(token, holder string) string { return token + "\x00" + holder }

// decode splits a stored value into token and holder (see decodeValue).
func decode(v []byte) (token, holder string) {
	t, h, _ := decodeValue(v)
	return t, h
}

// ours returns the comparisons that hold when key's value carries token:
// every such value lies strictly between token and token+"\x01", and no
// value with another token does (tokens contain no NUL). A comparison of the
// value of a missing key is false in etcd.
func ours(key, token string) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(key), ">", token),
		clientv3.Compare(clientv3.Value(key), "<", token+"\x01"),
	}
}

// maxHandOffTries bounds the transactions of one Acquire that finds the key
// free with nobody queued ahead but loses a race for it.
const maxHandOffTries = 3

// Acquire takes r.Key for r.Token: it refreshes (or grants) the store's etcd
// lease for r.TTL unless it was refreshed less than half a TTL ago (the
// grant's Since then says when), then in one transaction creates the key on it if the key
// does not exist and no waiter is queued ahead of r.Token (removing r.Token's
// queue entry), reads it if it already carries r.Token (same fence; see
// again), and otherwise reads the holder and the queue. A key handed to
// r.Token that the store's subscription saw is granted first, with no
// round trip (see takeHanded).
// A free key whose queue has r.Token at its head, when the store does not
// remember the entry's create revision, takes one more transaction. When
// the key cannot be granted the error is a *lease.HeldError, and with
// r.Queue r.Token's entry is refreshed (one keep-alive) or queued (a grant
// and a put). Orphans (keys whose Release failed) are deleted first; see
// purge.
func (s *Store) Acquire(ctx context.Context, r lease.Request) (lease.Grant, error) {
	if err := check(r, true); err != nil {
		return lease.Grant{}, err
	}
	if err := lease.CheckHolder(r.Holder); err != nil {
		return lease.Grant{}, err
	}
	if g, ok := s.takeHanded(r); ok {
		return g, nil
	}
	s.adopt(r)
	s.purge(ctx)
	// The store's etcd lease for r.TTL, unless it was refreshed less than
	// half a TTL ago, is refreshed first. A key attached to it lives at least
	// the TTL from that refresh, which Grant.Since tells the Client: while
	// the heartbeat keeps the lease alive (a client holding anything with
	// this TTL), an acquisition costs no keep-alive of its own, and its
	// renewals fall in step with the others on that lease.
	called := time.Now()
	l, refreshed, err := s.leaseFor(ctx, r.TTL, called.Add(-r.TTL/2))
	if err != nil {
		return lease.Grant{}, fmt.Errorf("etcdlease: acquire %q: %w", r.Key, err)
	}
	since := max(called.Sub(refreshed), 0)
	k := s.keyPath(r.Key)
	ek := s.entryKey(r.Key, r.Token)
	var rev int64 // the create revision of our queue entry, 0 if none
	q, queuedBefore := s.remembered(ek)
	if queuedBefore {
		rev = q.rev
	}
	// A waiter not yet queued is queued by the refused transaction itself
	// when the store has a spare etcd lease refreshed recently (spares.go).
	secs := ttlSeconds(r.TTL)
	var sp spare
	withSpare := false
	if r.Queue && !queuedBefore {
		sp, withSpare = s.freshSpare(secs)
	}
	defer func() {
		if withSpare {
			s.addSpare(sp) // not used
		}
	}()
	put := clientv3.OpPut(k, encode(r.Token, r.Holder), clientv3.WithLease(l.id))
	for try := 1; ; try++ {
		cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0)}, s.noneAhead(r.Key, r.Token, rev)...)
		refused := []clientv3.Op{clientv3.OpGet(k), s.opQueue(r.Key)}
		if withSpare {
			refused = append(refused, clientv3.OpPut(ek, r.Holder, clientv3.WithLease(sp.id)))
		}
		resp, err := s.cli.Txn(ctx).
			If(cmps...).
			Then(put, clientv3.OpDelete(ek)).
			Else(clientv3.OpTxn(ours(k, r.Token),
				[]clientv3.Op{clientv3.OpGet(k), clientv3.OpDelete(ek)},
				refused)).
			Commit()
		if err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) && !withSpare {
				s.drop(l)
			}
			// With a spare, the lease not found may be the spare's (the
			// next attempt tells), and after any other error the spare may
			// carry our entry: it is not used again.
			withSpare = false
			return lease.Grant{}, fmt.Errorf("etcdlease: acquire %q: %w", r.Key, err)
		}
		if resp.Succeeded {
			s.forget(ek)
			if queuedBefore {
				s.addSpare(spare{id: q.id, secs: q.secs, sent: q.sent}) // its entry is deleted
			}
			s.record(r.Key, r.Token, resp.Header.Revision, l.id, resp.Header.Revision, resp.Header.Revision)
			return lease.Grant{Fence: uint64(resp.Header.Revision), Lost: l.lost, Since: since}, nil
		}
		inner := resp.Responses[0].GetResponseTxn()
		if inner == nil || len(inner.Responses) < 2 {
			return lease.Grant{}, fmt.Errorf("etcdlease: acquire %q: malformed transaction response", r.Key)
		}
		if inner.Succeeded {
			return s.again(ctx, r, inner.Responses[0].GetResponseRange().GetKvs(), l, since, resp.Header.Revision)
		}
		kvs := inner.Responses[0].GetResponseRange().GetKvs()
		ahead, own := position(inner.Responses[1].GetResponseRange().GetKvs(), ek)
		var queuedNow int64 // the create revision of the entry this transaction put
		if withSpare {
			queuedNow = resp.Header.Revision
			if own != nil {
				queuedNow = own.CreateRevision // a put keeps an entry's place
			} else if ahead >= s.maxWaiters {
				// The queue, read before the put in the same transaction,
				// was full.
				withSpare = false
				return lease.Grant{}, fmt.Errorf("etcdlease: acquire %q: %w", r.Key, s.overCap(ctx, r, queuedNow, sp))
			}
			s.remember(ek, queued{rev: queuedNow, id: sp.id, secs: secs, sent: sp.sent, expires: sp.sent.Add(time.Duration(secs) * time.Second)})
			withSpare, queuedBefore = false, true
			q, _ = s.remembered(ek)
		} else if own == nil {
			s.forget(ek)
		}
		if len(kvs) == 0 && ahead == 0 {
			// Free, with nobody ahead: our view of the queue was stale (we
			// are its head) or we lost a race; try again with what we read.
			if try == maxHandOffTries {
				return lease.Grant{}, fmt.Errorf("etcdlease: acquire %q: the key and its queue changed under %d transactions in a row", r.Key, try)
			}
			rev = queuedNow
			if own != nil {
				rev = own.CreateRevision
			}
			continue
		}
		held := &lease.HeldError{Key: r.Key, Queued: ahead}
		if len(kvs) > 0 {
			_, held.Holder = decode(kvs[0].Value)
			held.Fence = uint64(fenceOf(kvs[0]))
		}
		if r.Queue && queuedNow == 0 {
			if err := s.enqueue(ctx, r, own); err != nil {
				return lease.Grant{}, fmt.Errorf("etcdlease: acquire %q: %w", r.Key, err)
			}
		}
		return lease.Grant{}, held
	}
}

// again grants r.Key to r.Token, which it already carries (kvs as read at
// revision at): an idempotent retry, or the acquisition of a key handed
// over to r.Token that the store did not learn of from its subscription.
// The key keeps its fence; if it is on another etcd lease than l (a queue
// entry's, after a hand-off), one more transaction moves it to l.
func (s *Store) again(ctx context.Context, r lease.Request, kvs []*mvccpb.KeyValue, l *etcdLease, since time.Duration, at int64) (lease.Grant, error) {
	if len(kvs) == 0 {
		// Impossible within one transaction: the key existed.
		return lease.Grant{}, fmt.Errorf("etcdlease: acquire %q: key vanished inside a transaction", r.Key)
	}
	kv := kvs[0]
	ek := s.entryKey(r.Key, r.Token)
	q, queued := s.remembered(ek)
	s.forget(ek) // the transaction deleted the entry
	if clientv3.LeaseID(kv.Lease) != l.id {
		rev, err := s.reattach(ctx, r, kv, l)
		if err != nil {
			return lease.Grant{}, fmt.Errorf("etcdlease: acquire %q: %w", r.Key, err)
		}
		at = rev
		s.reattached(ek, clientv3.LeaseID(kv.Lease))
	}
	if queued { // the entry is deleted, and the key is on l
		s.addSpare(spare{id: q.id, secs: q.secs, sent: q.sent})
	}
	s.record(r.Key, r.Token, kv.CreateRevision, l.id, at, fenceOf(kv))
	return lease.Grant{Fence: uint64(fenceOf(kv)), Lost: l.lost, Since: since}, nil
}

// Release deletes r.Key if its value still carries r.Token, and r.Token's
// queue entry if any, in one transaction; if r.Token did not hold the key it
// returns an error matching lease.ErrNotHeld. Deleting the key or the entry
// is the announcement to waiters (see Subscribe). When the store knows the
// waiter first in the key's queue (from an open subscription) and the fence
// r.Token holds, the same transaction hands the key over instead, if that
// waiter is still first: the key then carries the waiter's token and the
// fence plus one, on the etcd lease of its queue entry, which is deleted
// (see handoff.go). Orphans (keys whose Release
// failed) are deleted first; when this transaction fails, r becomes one:
// the store's next Acquire, RenewMany or Release deletes it.
func (s *Store) Release(ctx context.Context, r lease.Request) error {
	if err := check(r, false); err != nil {
		return err
	}
	if err := s.open(); err != nil {
		return err
	}
	s.adopt(r) // this call deletes it
	cmps, handOff, ok := s.handOff(r)
	s.unrecord(r.Key)
	s.purge(ctx)
	k := s.keyPath(r.Key)
	ek := s.entryKey(r.Key, r.Token)
	release := clientv3.OpTxn(ours(k, r.Token),
		[]clientv3.Op{clientv3.OpDelete(k), clientv3.OpDelete(ek)},
		[]clientv3.Op{clientv3.OpDelete(ek)})
	txn := s.cli.Txn(ctx)
	if ok {
		txn = txn.If(cmps...).Then(append(handOff, clientv3.OpDelete(ek))...).Else(release)
	} else {
		txn = txn.Then(release)
	}
	resp, err := txn.Commit()
	if err != nil {
		// The key may still carry r.Token, on an etcd lease that the
		// store's other operations keep alive: it would never expire.
		s.orphan(r)
		s.settle(ek, false, false)
		return fmt.Errorf("etcdlease: release %q: %w", r.Key, err)
	}
	if ok && resp.Succeeded {
		s.settle(ek, true, true)
		return nil // handed over
	}
	inner := resp.Responses[0].GetResponseTxn()
	released := inner != nil && inner.Succeeded
	s.settle(ek, true, released)
	if !released {
		return fmt.Errorf("etcdlease: release %q: %w", r.Key, lease.ErrNotHeld)
	}
	return nil
}

// Inspect reports who holds key, with one read. Remaining is always 0.
func (s *Store) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if key == "" {
		return lease.Info{}, lease.Invalid("key", "empty")
	}
	if strings.IndexByte(key, 0) >= 0 {
		return lease.Info{}, lease.Invalid("key", "contains a NUL byte (reserved for the queues of waiters)")
	}
	if err := s.open(); err != nil {
		return lease.Info{}, err
	}
	resp, err := s.cli.Get(ctx, s.keyPath(key))
	if err != nil {
		return lease.Info{}, fmt.Errorf("etcdlease: inspect %q: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return lease.Info{Key: key}, nil
	}
	_, holder := decode(resp.Kvs[0].Value)
	return lease.Info{Key: key, Held: true, Holder: holder, Fence: uint64(fenceOf(resp.Kvs[0]))}, nil
}

// revokeTimeout bounds how long Close spends revoking the store's etcd leases.
const revokeTimeout = 2 * time.Second

// Close closes the store's subscriptions and its renewal watch, and revokes
// its etcd leases (which deletes any key still on them) and those of the
// queue entries it wrote (its waiters leave their queues), waiting at most
// 2s for etcd; the Grant.Lost channels of those leases are closed. Later operations return ErrClosed.
// Close does not close the etcd client. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var ls []*etcdLease
	for _, l := range s.leases {
		ls = append(ls, l)
	}
	var subs []*subscription
	for sub := range s.subs {
		subs = append(subs, sub)
	}
	clear(s.orphans) // revoking the etcd leases deletes them
	s.mu.Unlock()

	var errs []error
	for _, sub := range subs {
		errs = append(errs, sub.Close())
	}
	s.closeWatch()
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	s.revokeQueued(ctx)
	for _, l := range ls {
		// Best effort: an etcd lease that cannot be revoked now expires
		// after its TTL, since nobody refreshes it any more.
		_, _ = s.cli.Revoke(ctx, l.id)
		s.drop(l)
	}
	return errors.Join(errs...)
}

// open returns ErrClosed once the store is closed.
func (s *Store) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}
