// Renew, RenewMany and Release: writes to the token's own node.

package zklease

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Renew implements driver.Store: a write of the holder's node, which moves
// its mtime, the TTL's origin. One round trip for a lease this Store
// granted; three otherwise (find the node, read it, write it).
func (s *Store) Renew(ctx context.Context, r driver.Request) error {
	e, err := s.find(ctx, r)
	if err == nil && !e.held {
		err = fmt.Errorf("the token is queued, not holding: %w", lease.ErrNotHeld)
	}
	if err == nil {
		_, err = s.refresh(r, &e)
	}
	return wrapped(err, "renew", r.Key)
}

// wrapped names op and key in err, if any.
func wrapped(err error, op, key string) error {
	if err != nil {
		return fmt.Errorf("zklease: %s %q: %w", op, key, err)
	}
	return nil
}

// find returns r's entry: the one this Store remembers, or else the token's
// node found by listing the key's nodes.
func (s *Store) find(ctx context.Context, r driver.Request) (entry, error) {
	if _, err := s.usable(ctx); err != nil {
		return entry{}, err
	}
	if e, ok := s.remembered(r); ok {
		return e, nil
	}
	// Another Store's token: its node may be newer than what this session's
	// server has applied (a follower lags); sync first, as a read after a
	// write of our own would be.
	_, err := s.conn.Sync(s.parent(r.Key))
	if errors.Is(err, zk.ErrNoNode) {
		err = nil // no node under it either: the read below says so
	}
	if err != nil {
		return entry{}, fmt.Errorf("sync %s: %w", s.parent(r.Key), err)
	}
	nodes, i, err := s.nodes(s.parent(r.Key), r.Token)
	if err == nil && i < 0 {
		err = s.broken(r.Key, r.Token, fmt.Errorf("the token holds no node: %w", lease.ErrNotHeld))
	}
	if err != nil {
		return entry{}, err
	}
	return s.read(r.Key, nodes[i].path, i < lead(nodes))
}

// read reads the node at p into an entry, held or not.
func (s *Store) read(key, p string, held bool) (entry, error) {
	data, st, err := s.conn.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return entry{}, fmt.Errorf("node %s gone: %w", redactPath(p), lease.ErrNotHeld)
	} else if err != nil {
		return entry{}, fmt.Errorf("read %s: %w", redactPath(p), err)
	}
	d, err := decodeData(data)
	if err != nil {
		return entry{}, fmt.Errorf("node %s: %w", redactPath(p), err)
	}
	return entry{key: key, path: p, version: st.Version, mtime: st.Mtime, ttlMs: d.TTLms, czxid: st.Czxid, epoch: d.Epoch, holder: d.Holder, held: held}, nil
}

// refresh writes r's data to e's node, whatever its version, and returns
// the server's time of the write. Only another Store of the same token
// writes it too, which leaves e's mtime older than the node's: written's
// judge is then stricter, never laxer. (A judge deleting the node expired
// checks its version: a renewal racing with it wins.)
func (s *Store) refresh(r driver.Request, e *entry) (int64, error) {
	st, err := s.conn.Set(e.path, encodeData(r, e.epoch), -1)
	if errors.Is(err, zk.ErrNoNode) {
		s.entries.Delete(r.Token)
		return 0, s.broken(r.Key, r.Token, fmt.Errorf("node %s gone: %w", redactPath(e.path), lease.ErrNotHeld))
	} else if err != nil {
		return 0, fmt.Errorf("write %s: %w", redactPath(e.path), err)
	}
	return st.Mtime, s.written(r, e, st)
}

// written records a write st of e's node as r's entry, unless e's TTL had
// run out when it landed: the lease (or queue entry) had expired, so the
// node goes.
func (s *Store) written(r driver.Request, e *entry, st *zk.Stat) error {
	if st.Mtime >= e.mtime+e.ttlMs {
		s.entries.Delete(r.Token)
		_ = s.conn.Delete(e.path, st.Version) // else the next acquirer drops it
		return errExpired
	}
	e.version, e.mtime, e.ttlMs, e.czxid = st.Version, st.Mtime, r.TTL.Milliseconds(), st.Czxid
	s.entries.Store(r.Token, *e)
	return nil
}

// RenewMany implements driver.BatchRenewer: the leases this Store granted
// are renewed in as few multis as ZooKeeper's packet limit allows; a multi
// that fails (a lease is gone) is redone lease by lease, and so are the
// leases this Store does not know.
func (s *Store) RenewMany(ctx context.Context, rs []driver.Request) []error {
	errs := make([]error, len(rs))
	var idx []int // the requests in ops, and their entries
	var ents []entry
	var ops []any
	size := multiReqFixed
	flush := func() {
		res, err := s.conn.Multi(ops...)
		for k, i := range idx {
			if err != nil || len(res) != len(idx) || res[k].Stat == nil {
				errs[i] = s.Renew(ctx, rs[i])
			} else {
				errs[i] = wrapped(s.written(rs[i], &ents[k], res[k].Stat), "renew", rs[i].Key)
			}
		}
		idx, ents, ops, size = nil, nil, nil, multiReqFixed
	}
	for i, r := range rs {
		e, ok := s.remembered(r)
		if _, err := s.usable(ctx); err != nil || !ok || !e.held {
			errs[i] = s.Renew(ctx, r)
			continue
		}
		op := &zk.SetDataRequest{Path: e.path, Data: encodeData(r, e.epoch), Version: -1}
		n := multiReqPerOp + len(op.Path) + len(op.Data)
		if len(ops) > 0 && (size+n > multiBudget || len(ops) == maxMultiOps) {
			flush()
		}
		idx, ents, ops, size = append(idx, i), append(ents, e), append(ops, op), size+n
	}
	if len(ops) > 0 {
		flush()
	}
	return errs
}

// The size of a renewal multi, from its jute encoding. ZooKeeper closes the
// connection on a packet over jute.maxbuffer (0xfffff bytes by default):
//
//	request:  length 4 + header 8 + per op [MultiHeader 9 + path (4 + len)
//	          + data (4 + len) + version 4] + the closing MultiHeader 9
//	response: length 4 + header 16 + per op [MultiHeader 9 + Stat 68] + 9
//
// A multi is filled to 1 MiB − 64 KiB: the margin covers what wraps the
// request when a follower forwards it to the leader.
const (
	multiBudget   = 0xfffff - 64<<10
	multiReqFixed = 4 + 8 + 9
	multiReqPerOp = 9 + 4 + 4 + 4
	maxMultiOps   = (multiBudget - 4 - 16 - 9) / (9 + 68) // the response's bound
)

// Release implements driver.Store: it deletes the token's node, the
// holder's or a queued entry (then lease.ErrNotHeld: it held nothing). The
// deletion wakes the waiter queued behind it.
func (s *Store) Release(ctx context.Context, r driver.Request) error {
	e, err := s.find(ctx, r)
	if err == nil {
		s.entries.Delete(r.Token)
		err = s.conn.Delete(e.path, -1)
	}
	switch {
	case errors.Is(err, zk.ErrNoNode):
		err = fmt.Errorf("node gone: %w", lease.ErrNotHeld)
	case err == nil && !e.held:
		err = fmt.Errorf("the token left the queue: %w", lease.ErrNotHeld)
	}
	return wrapped(err, "release", r.Key)
}
