// The FIFO queue of waiters per key (lease.Queuer): one etcd key per
// waiting token under the lease key's queue prefix, each on an etcd lease of
// its own, listed in create-revision order.

package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
)

var _ lease.Queuer = (*Store)(nil)

// QueuesWaiters reports true: a Store hands a freed key to the waiter queued
// first (lease.Queuer); see the package documentation, "FIFO queue".
func (s *Store) QueuesWaiters() bool { return true }

// queueSep separates a lease key's segment from the tokens of its queue.
// Lease keys contain no NUL byte (the Client and check reject them), nor do
// prefixes (New rejects them), so no lease key, nor any key of a nested
// namespace, lies under a queue prefix, and a queue prefix holds only that
// key's queue.
const queueSep = "\x00q/"

// queuePrefix returns the etcd prefix of key's queue of waiters.
func (s *Store) queuePrefix(key string) string { return s.keyPath(key) + queueSep }

// entryKey returns the etcd key of token's entry in key's queue.
func (s *Store) entryKey(key, token string) string { return s.queuePrefix(key) + token }

// opQueue reads key's queue: its entries (without values) oldest first.
func (s *Store) opQueue(key string) clientv3.Op {
	return clientv3.OpGet(s.queuePrefix(key), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
}

// noneAhead returns the comparisons that hold when no entry of key's queue
// is older than token's entry, whose create revision is rev; rev 0 means
// token is not queued, and the queue must then be empty. A comparison over a
// range holds when it holds for every key of the range; over an empty range
// it compares a missing key (create revision 0).
func (s *Store) noneAhead(key, token string, rev int64) []clientv3.Cmp {
	qp := s.queuePrefix(key)
	if rev == 0 {
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(qp), "<", 1).WithPrefix()}
	}
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(s.entryKey(key, token)), "=", rev),
		clientv3.Compare(clientv3.CreateRevision(qp), ">", rev-1).WithPrefix(),
	}
}

// position returns how many entries of q (oldest first) are ahead of the
// entry ek, all of them if ek is not in q, and ek's own entry, or nil.
func position(q []*mvccpb.KeyValue, ek string) (int, *mvccpb.KeyValue) {
	for i, kv := range q {
		if string(kv.Key) == ek {
			return i, kv
		}
	}
	return len(q), nil
}

// queued is what a Store remembers of an entry it wrote: enough to try the
// hand-off in one transaction (its create revision) and to revoke it on
// Close. It is a cache: etcd's copy decides.
type queued struct {
	rev     int64
	id      clientv3.LeaseID
	secs    int64     // the TTL of its etcd lease, in seconds
	sent    time.Time // when the entry's etcd lease was last refreshed (the request's send time)
	expires time.Time // local estimate of the entry's expiry, for pruning
}

// maxRemembered is the size above which remember prunes expired entries.
const maxRemembered = 1024

// remembered returns the store's memory of entry ek.
func (s *Store) remembered(ek string) (queued, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queued[ek]
	return q, ok
}

// remember records entry ek, pruning entries that must have expired (their
// waiters neither acquired nor gave up through this store) when the memory
// grows large.
func (s *Store) remember(ek string, q queued) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queued) >= maxRemembered {
		now := time.Now()
		for k, old := range s.queued {
			if now.After(old.expires) {
				delete(s.queued, k)
			}
		}
	}
	s.queued[ek] = q
}

// forget drops the store's memory of entry ek.
func (s *Store) forget(ek string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.queued, ek)
}

// enqueue refreshes r.Token's entry in r.Key's queue, own as just read (nil
// if absent): one keep-alive of the entry's etcd lease, none if the store
// refreshed it less than a quarter of its TTL ago (it then lives at least
// three quarters of a TTL more, and the Client's next attempt comes within
// a renewal interval, a third of a TTL). An absent entry, or one whose etcd
// lease expired since the read, is appended to the queue with a put, on a
// spare etcd lease (kept alive first unless refreshed less than a quarter
// of its TTL ago) or, if the store has none, on a new etcd lease of r.TTL.
func (s *Store) enqueue(ctx context.Context, r lease.Request, own *mvccpb.KeyValue) error {
	ek := s.entryKey(r.Key, r.Token)
	secs := ttlSeconds(r.TTL)
	if own != nil {
		id := clientv3.LeaseID(own.Lease)
		q, ok := s.remembered(ek)
		if ok && q.id == id && fresh(q.sent, q.secs) {
			return nil
		}
		if ok && q.id == id {
			secs = q.secs
		}
		sent := time.Now()
		_, err := s.cli.KeepAliveOnce(ctx, id)
		if err == nil {
			s.remember(ek, queued{rev: own.CreateRevision, id: id, secs: secs, sent: sent, expires: sent.Add(time.Duration(secs) * time.Second)})
			return nil
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("keep-alive of the queue entry: %w", err)
		}
		// The entry expired after the read: queue again, at the back.
		secs = ttlSeconds(r.TTL)
	}
	s.forget(ek)
	id, sent, err := s.entryLease(ctx, secs)
	if err != nil {
		return err
	}
	// A put that counts the queue before it, atomically: if the entry
	// appeared since the read (a concurrent call with the same token), it
	// keeps its create revision, i.e. its place.
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.queuePrefix(r.Key), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpPut(ek, r.Holder, clientv3.WithLease(id), clientv3.WithPrevKV())).Commit()
	if err != nil {
		return fmt.Errorf("queueing: %w", err)
	}
	if len(resp.Responses) < 2 || resp.Responses[1].GetResponsePut() == nil {
		return errors.New("queueing: malformed transaction response")
	}
	prev := resp.Responses[1].GetResponsePut().PrevKv
	rev := resp.Header.Revision
	if prev != nil {
		rev = prev.CreateRevision
	} else if n := resp.Responses[0].GetResponseRange().GetCount(); n >= int64(s.maxWaiters) {
		return s.overCap(ctx, r, rev, spare{id: id, secs: secs, sent: sent})
	}
	s.remember(ek, queued{rev: rev, id: id, secs: secs, sent: sent, expires: sent.Add(time.Duration(secs) * time.Second)})
	return nil
}

// overCap undoes the entry of r.Token put at revision rev, on etcd lease
// sp, behind MaxWaiters or more entries: it deletes the entry if it is still
// that one, keeps sp as a spare, and returns a *lease.QueueFullError. Entries
// are counted atomically with their put and entries ahead only ever leave,
// so the entries kept never exceed the cap; one put beyond it stays until
// this delete (or, if the store dies first, its etcd lease's TTL).
func (s *Store) overCap(ctx context.Context, r lease.Request, rev int64, sp spare) error {
	ek := s.entryKey(r.Key, r.Token)
	s.forget(ek)
	_, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(ek), "=", rev)).
		Then(clientv3.OpDelete(ek)).Commit()
	if err != nil {
		return fmt.Errorf("removing an entry beyond the cap of %d waiters: %w", s.maxWaiters, err)
	}
	s.addSpare(sp)
	return &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters}
}

// fresh reports whether an etcd lease of secs seconds refreshed at sent
// was refreshed less than a quarter of its TTL ago.
func fresh(sent time.Time, secs int64) bool {
	return time.Since(sent) < time.Duration(secs)*time.Second/4
}

// entryLease returns an etcd lease of secs seconds for a new queue entry,
// and the send time of its last refresh: a spare, kept alive first unless
// it is fresh, or a new one.
func (s *Store) entryLease(ctx context.Context, secs int64) (clientv3.LeaseID, time.Time, error) {
	for {
		sp, ok := s.takeSpare(secs)
		if !ok {
			break
		}
		if fresh(sp.sent, secs) {
			return sp.id, sp.sent, nil
		}
		sent := time.Now()
		_, err := s.cli.KeepAliveOnce(ctx, sp.id)
		if err == nil {
			return sp.id, sent, nil
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, time.Time{}, fmt.Errorf("keep-alive of a spare etcd lease: %w", err)
		}
	}
	sent := time.Now()
	g, err := s.cli.Grant(ctx, secs)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("granting the queue entry's etcd lease: %w", err)
	}
	return g.ID, sent, nil
}

// revokeQueued revokes the etcd leases of the entries the store wrote,
// which deletes the entries (its waiters leave their queues at once), of
// the keys handed to it that are still on their entry's lease, and its
// spare leases.
func (s *Store) revokeQueued(ctx context.Context) {
	s.mu.Lock()
	ids := s.spareIDsLocked()
	for _, q := range s.queued {
		ids = append(ids, q.id)
	}
	for _, c := range s.carried {
		ids = append(ids, c.id)
	}
	clear(s.queued)
	clear(s.carried)
	s.mu.Unlock()
	for _, id := range ids {
		_, _ = s.cli.Revoke(ctx, id) // best effort: it expires after its TTL
	}
}
