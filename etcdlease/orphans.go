// Orphans: keys whose Release failed, so that they may still be on a shared
// etcd lease the store keeps alive. The store deletes them (if they still
// carry their token) at the start of its next Acquire, RenewMany or Release.

package etcdlease

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
)

// orphanID names an orphan: a lease key (without the prefix) and the token
// it may still carry.
type orphanID struct{ key, token string }

// orphanBatch is the most orphans one purge deletes (one transaction of
// orphanBatch nested transactions, under etcd's default limit of 128
// operations per transaction); more wait for the next operations.
const orphanBatch = 64

// orphan records that the release of r failed: its key may still carry
// r.Token, on the store's etcd lease for r.TTL, which the store's later
// acquisitions and renewals of other keys would keep alive. It remembers
// that etcd lease (nil if none or r.TTL is unknown) so that the record can
// be dropped when the lease is found gone (drop).
func (s *Store) orphan(r lease.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return // Close revoked the store's etcd leases, and the key with them
	}
	var l *etcdLease
	if r.TTL > 0 {
		l = s.leases[ttlSeconds(r.TTL)]
	}
	s.orphans[orphanID{r.Key, r.Token}] = l
}

// adopt forgets r as an orphan: its caller is using the token again (a
// retried Release does its own delete; an Acquire wants the key).
func (s *Store) adopt(r lease.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.orphans, orphanID{r.Key, r.Token})
}

// purge deletes up to orphanBatch orphans in one transaction: each key only
// if it still carries the orphan's token (never by key alone), with the
// token's queue entry. Orphans are forgotten once the transaction succeeds,
// whether it deleted them or found them gone or taken over; on an error
// they are kept and the store's next operation tries again. Without orphans
// it costs nothing.
func (s *Store) purge(ctx context.Context) {
	s.mu.Lock()
	if len(s.orphans) == 0 {
		s.mu.Unlock()
		return
	}
	ids := make([]orphanID, 0, min(len(s.orphans), orphanBatch))
	for id := range s.orphans {
		if len(ids) == orphanBatch {
			break
		}
		ids = append(ids, id)
	}
	s.mu.Unlock()

	ops := make([]clientv3.Op, len(ids))
	for i, id := range ids {
		k, ek := s.keyPath(id.key), s.entryKey(id.key, id.token)
		ops[i] = clientv3.OpTxn(ours(k, id.token),
			[]clientv3.Op{clientv3.OpDelete(k), clientv3.OpDelete(ek)},
			[]clientv3.Op{clientv3.OpDelete(ek)})
	}
	if _, err := s.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		// Best effort: the operation that called purge goes on (it most
		// likely fails the same way); the next one tries again.
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.orphans, id)
		delete(s.queued, s.entryKey(id.key, id.token)) // the entry is gone too
	}
}

// dropOrphansLocked forgets the orphans recorded on l, which etcd no longer
// has: their keys are gone with it. s.mu is held.
func (s *Store) dropOrphansLocked(l *etcdLease) {
	for id, ol := range s.orphans {
		if ol == l {
			delete(s.orphans, id)
		}
	}
}
