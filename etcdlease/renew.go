// Renewal: Renew and RenewMany refresh the etcd leases involved (one
// keep-alive each) and check, in read-only transactions, that every key the
// store cannot vouch for (vouch.go) still carries its token on that etcd
// lease.

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

// readBatch is the most keys read by one transaction; etcd's default limit
// is 128 operations per transaction.
const readBatch = 64

// Renew extends r.Key to r.TTL from now if r.Token still holds it; see
// RenewMany.
func (s *Store) Renew(ctx context.Context, r lease.Request) error {
	return s.RenewMany(ctx, []lease.Request{r})[0]
}

// RenewMany renews every lease of rs: one keep-alive per distinct etcd lease
// (one per TTL). A key is read (a full check: one read-only transaction per
// 64 keys) only when the store cannot vouch for it: the first time it renews
// a key it did not grant, after the renewal watch reported a change of the
// key, or when the watch is not running or not current (see vouch.go). A key
// that no longer carries its token, or whose etcd lease etcd no longer has,
// gets an error matching lease.ErrNotHeld (and the Grant.Lost channel of
// that etcd lease is closed). A key still carrying its token but attached
// to another etcd lease is re-attached to the store's lease for its TTL (one
// more transaction). Orphans (keys whose Release failed) are deleted first,
// before the keep-alive that would extend them; see purge.
func (s *Store) RenewMany(ctx context.Context, rs []lease.Request) []error {
	errs := make([]error, len(rs))
	if err := s.open(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	s.purge(ctx)
	start := time.Now()
	current := s.drain()

	// One keep-alive per distinct etcd lease.
	type group struct {
		l   *etcdLease // nil: the store has no lease for this TTL
		err error      // the keep-alive's error
	}
	groups := make(map[int64]*group)
	dead := make(map[clientv3.LeaseID]bool)
	var rev int64 // the highest revision a keep-alive saw
	var pending []int
	for i, r := range rs {
		if err := check(r, true); err != nil {
			errs[i] = err
			continue
		}
		secs := ttlSeconds(r.TTL)
		g := groups[secs]
		if g == nil {
			g = &group{l: s.current(secs)}
			if g.l != nil {
				var kr int64
				kr, g.err = s.keepAlive(ctx, g.l)
				rev = max(rev, kr)
				if g.err != nil && isNotHeld(g.err) {
					dead[g.l.id] = true
				}
			}
			groups[secs] = g
		}
		if g.err != nil && !isNotHeld(g.err) {
			errs[i] = fmt.Errorf("etcdlease: renew %q: %w", r.Key, g.err)
			continue
		}
		pending = append(pending, i)
	}

	// Keys the watch vouches for need no read.
	if current {
		s.mu.Lock()
		n := 0
		for _, i := range pending {
			r := rs[i]
			if l := groups[ttlSeconds(r.TTL)].l; l != nil && !dead[l.id] && s.vouchedLocked(r.Key, r.Token, l.id) {
				continue // errs[i] stays nil
			}
			pending[n] = i
			n++
		}
		pending = pending[:n]
		s.mu.Unlock()
	}

	// Check the others, readBatch per transaction. The watch starts first,
	// so that it covers the keys from the revision they are read at.
	if len(pending) > 0 {
		_ = s.ensureWatch(ctx) // without it, the next round reads the keys again
	}
	for len(pending) > 0 {
		n := min(len(pending), readBatch)
		batch := pending[:n]
		pending = pending[n:]
		ops := make([]clientv3.Op, n)
		for j, i := range batch {
			ops[j] = clientv3.OpGet(s.keyPath(rs[i].Key))
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		for j, i := range batch {
			r := rs[i]
			if err != nil {
				errs[i] = fmt.Errorf("etcdlease: renew %q: %w", r.Key, err)
				continue
			}
			kvs := resp.Responses[j].GetResponseRange().GetKvs()
			var kv *mvccpb.KeyValue
			if len(kvs) > 0 {
				kv = kvs[0]
			}
			errs[i] = s.judge(ctx, r, kv, groups[ttlSeconds(r.TTL)].l, dead, start, resp.Header.Revision)
		}
	}
	s.askProgress(ctx, rev)
	return errs
}

// judge decides the renewal of r from its key's kv read at revision at
// (nil: missing), after the keep-alive of l (nil: the store had no lease for
// r's TTL) and with dead the etcd leases found gone. A key found ours on l is
// recorded, for the watch to vouch for it from then on.
func (s *Store) judge(ctx context.Context, r lease.Request, kv *mvccpb.KeyValue, l *etcdLease, dead map[clientv3.LeaseID]bool, start time.Time, at int64) error {
	s.unrecord(r.Key)
	if kv == nil {
		return fmt.Errorf("etcdlease: renew %q: the key is gone: %w", r.Key, lease.ErrNotHeld)
	}
	if token, _ := decode(kv.Value); token != r.Token {
		return fmt.Errorf("etcdlease: renew %q: held by another token: %w", r.Key, lease.ErrNotHeld)
	}
	id := clientv3.LeaseID(kv.Lease)
	switch {
	case dead[id]:
		return fmt.Errorf("etcdlease: renew %q: its etcd lease %x is gone: %w", r.Key, kv.Lease, lease.ErrNotHeld)
	case l != nil && !dead[l.id] && id == l.id:
		s.record(r.Key, r.Token, kv.CreateRevision, l.id, at, fenceOf(kv))
		return nil
	}
	l, _, err := s.leaseFor(ctx, r.TTL, start)
	if err == nil {
		at, err = s.reattach(ctx, r, kv, l)
	}
	if err != nil {
		return fmt.Errorf("etcdlease: renew %q: %w", r.Key, err)
	}
	s.reattached(s.entryKey(r.Key, r.Token), id)
	s.record(r.Key, r.Token, kv.CreateRevision, l.id, at, fenceOf(kv))
	return nil
}

// reattach moves r's key, found on another etcd lease than l (the store's
// for its TTL), to l, if it has not changed since it was read as kv (same
// modification revision: the value, with its fence, is kept). It returns
// the revision of the move.
func (s *Store) reattach(ctx context.Context, r lease.Request, kv *mvccpb.KeyValue, l *etcdLease) (int64, error) {
	k := s.keyPath(r.Key)
	cmps := append(ours(k, r.Token), clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision))
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(k, string(kv.Value), clientv3.WithLease(l.id))).Commit()
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.drop(l)
		}
		return 0, err
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("the key changed: %w", lease.ErrNotHeld)
	}
	return resp.Header.Revision, nil
}

func isNotHeld(err error) bool { return errors.Is(err, lease.ErrNotHeld) }
