// Listing keys and breaking leases (driver.Lister, driver.Breaker).

package etcdlease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// List lists the keys that start with prefix, limit etcd keys a page, at
// the revision of the first page (see the package doc).
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	page, next, err := s.list(ctx, prefix, cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("etcdlease: list %q: %w", prefix, err)
	}
	return page, next, nil
}

// list is List, its errors without context.
func (s *Store) list(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	from := s.prefix + escapeKey(prefix)
	end, rev := clientv3.GetPrefixRangeEnd(from), int64(0)
	if cursor != "" {
		r, k, _ := strings.Cut(cursor, "/")
		n, err := strconv.ParseInt(r, 10, 64)
		if err != nil || n <= 0 || !strings.HasPrefix(k, from) {
			return nil, "", lease.Invalid("cursor", "%q is not one of this listing's", cursor)
		}
		rev, from = n, k
	}
	resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(int64(max(limit, 1))), clientv3.WithRev(rev))
	if err != nil {
		return nil, "", err
	}
	kvs, next, rev := resp.Kvs, "", cmp.Or(rev, resp.Header.Revision)
	if resp.More {
		last := string(kvs[len(kvs)-1].Key)
		seg, _, _ := strings.Cut(last[len(s.prefix):], "\x00")
		next = s.prefix + seg + "\x01" // past the last lease key's etcd keys
		rest, err := s.cli.Get(ctx, last+"\x00", clientv3.WithRange(next), clientv3.WithRev(rev))
		if err != nil {
			return nil, "", err
		}
		kvs, next = append(kvs, rest.Kvs...), strconv.FormatInt(rev, 10)+"/"+next
	}
	var keys []string
	groups := make(map[string][]*mvccpb.KeyValue)
	for _, kv := range kvs {
		if key, _, _, ok := s.parseKey(kv.Key); ok {
			if groups[key] == nil {
				keys = append(keys, key)
			}
			groups[key] = append(groups[key], kv)
		}
	}
	var page []driver.Entry
	for _, key := range keys {
		if kv := groups[key][0]; string(kv.Key) == s.keyPath(key) { // the writer's key sorts first
			if err := (state{holder: kv}).corrupt(); err != nil {
				return nil, "", fmt.Errorf("etcdlease: list: %w", err)
			}
		}
		e, _, err := s.entry(ctx, key, groups[key])
		if err != nil {
			return nil, "", err
		}
		if len(e.Holders)+len(e.Waiters)+len(e.Broken) > 0 {
			page = append(page, e)
		}
	}
	return page, next, nil
}

// entry returns key's entry from its etcd keys, in key order, and the etcd
// leases of its holds (in the order of its Holders) and of the evicted holds
// its tombstones name.
func (s *Store) entry(ctx context.Context, key string, kvs []*mvccpb.KeyValue) (driver.Entry, []int64, error) {
	e := driver.Entry{Key: key}
	var leases, evicted []int64
	var queue []*mvccpb.KeyValue
	var epoch uint64
	for _, kv := range kvs {
		_, token, kind, _ := s.parseKey(kv.Key)
		switch kind {
		case 0:
			token, holder, _ := strings.Cut(string(kv.Value), "\x00")
			e.Holders = append(e.Holders, driver.Holder{Token: token, Holder: holder, Fence: uint64(kv.ModRevision)})
			leases = append(leases, kv.Lease)
		case kindReader:
			e.Holders = append(e.Holders, driver.Holder{Token: token, Holder: string(kv.Value), Shared: true})
			leases = append(leases, kv.Lease)
		case kindEpoch:
			epoch = uint64(kv.ModRevision)
		case kindBroken:
			e.Broken = append(e.Broken, token)
			if id, err := strconv.ParseInt(string(kv.Value), 10, 64); err == nil {
				evicted = append(evicted, id)
			}
		default:
			queue = append(queue, kv)
		}
	}
	for i := range e.Holders {
		if e.Holders[i].Shared {
			e.Holders[i].Fence = epoch
		}
		resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(leases[i]))
		if err != nil {
			return driver.Entry{}, nil, err
		}
		e.Holders[i].Remaining = time.Duration(max(resp.TTL, 0)) * time.Second
	}
	slices.SortFunc(queue, func(a, b *mvccpb.KeyValue) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) })
	for _, kv := range queue {
		_, token, kind, _ := s.parseKey(kv.Key)
		e.Waiters = append(e.Waiters, driver.Waiter{Token: token, Shared: kind == kindShared})
	}
	return e, append(leases, evicted...), nil
}

// Break evicts key's holds in one transaction that leaves their tombstones,
// then revokes their etcd leases (see the package doc): each carries the
// keys its holder's store granted in one batch, so revoking it also ends
// the holder's other keys of that batch (whose renewals then fail).
func (s *Store) Break(ctx context.Context, key string) (driver.Entry, error) {
	e, err := s.breakKey(ctx, key)
	if err != nil {
		return driver.Entry{}, fmt.Errorf("etcdlease: break %q: %w", key, err)
	}
	return e, nil
}

// breakKey is Break, its errors without context.
func (s *Store) breakKey(ctx context.Context, key string) (driver.Entry, error) {
	k, rk := s.keyPath(key), s.subKey(key, kindReader, "")
	resp, err := s.cli.Get(ctx, k, clientv3.WithRange(k+"\x01"))
	if err != nil {
		return driver.Entry{}, err
	}
	e, leases, err := s.entry(ctx, key, resp.Kvs)
	if err != nil {
		return driver.Entry{}, err
	}
	if len(e.Holders) > 0 {
		secs := int64(1) // etcd's TTL is rounded down
		for _, h := range e.Holders {
			secs = max(secs, int64(h.Remaining/time.Second)+1)
		}
		tomb, err := s.cli.Grant(ctx, secs)
		if err != nil {
			return driver.Entry{}, err
		}
		read := resp.Header.Revision + 1
		ops := []clientv3.Op{clientv3.OpDelete(k), clientv3.OpDelete(rk, clientv3.WithPrefix())}
		for i, h := range e.Holders {
			ops = append(ops, clientv3.OpPut(s.subKey(key, kindBroken, h.Token), strconv.FormatInt(leases[i], 10), clientv3.WithLease(tomb.ID)))
		}
		txn, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "<", read),
			clientv3.Compare(clientv3.ModRevision(rk), "<", read).WithPrefix()).Then(ops...).Commit()
		if err == nil && !txn.Succeeded {
			err = errors.New("its holds changed while it was read; try again")
		}
		if err != nil {
			_, _ = s.cli.Revoke(ctx, tomb.ID)
			return driver.Entry{}, err
		}
	}
	for _, id := range leases {
		if _, err := s.cli.Revoke(ctx, clientv3.LeaseID(id)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return driver.Entry{}, err
		}
	}
	return e, nil
}
