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

// Renew implements driver.Store: a version-checked write of the holder's
// node, which moves its mtime, the TTL's origin. One round trip for a lease
// this Store granted; three otherwise (find the node, read it, write it).
func (s *Store) Renew(ctx context.Context, r driver.Request) error {
	if _, err := s.usable(ctx); err != nil {
		return err
	}
	e, ok := s.remembered(r)
	if !ok {
		var err error
		if e, err = s.lookup(r); err != nil {
			return err
		}
	}
	if !e.held {
		return fmt.Errorf("zklease: renew %q: the token is queued, not holding: %w", r.Key, lease.ErrNotHeld)
	}
	if _, err := s.refresh(r, &e, false); err != nil {
		return fmt.Errorf("zklease: renew %q: %w", r.Key, err)
	}
	s.remember(r.Token, e)
	return nil
}

// lookup finds and reads r's node by its token; held if it is the lowest.
func (s *Store) lookup(r driver.Request) (entry, error) {
	parent := s.parent(r.Key)
	children, _, err := s.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return entry{}, fmt.Errorf("zklease: %q has no holder: %w", r.Key, lease.ErrNotHeld)
	}
	if err != nil {
		return entry{}, fmt.Errorf("zklease: list %s: %w", parent, err)
	}
	for i, n := range sortNodes(children) {
		if n.token != r.Token {
			continue
		}
		p := parent + "/" + n.name
		data, st, err := s.conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			break
		}
		if err != nil {
			return entry{}, fmt.Errorf("zklease: read %s: %w", redactPath(p), err)
		}
		d := decodeData(data)
		return entry{key: r.Key, path: p, version: st.Version, mtime: st.Mtime, ttlMs: d.TTLms, czxid: st.Czxid, held: i == 0 && !d.Waiting, marked: d.Waiting}, nil
	}
	return entry{}, fmt.Errorf("zklease: %q is not held by this token: %w", r.Key, lease.ErrNotHeld)
}

// refresh writes r's data to e's node, version-checked, marked waiting or
// not, and returns the server's time of the write.
func (s *Store) refresh(r driver.Request, e *entry, waiting bool) (int64, error) {
	e.marked = waiting
	st, err := s.conn.Set(e.path, encodeData(r, waiting), e.version)
	if errors.Is(err, zk.ErrBadVersion) {
		// Written by another Store of the same token: read it and write again.
		var data []byte
		if data, st, err = s.conn.Get(e.path); err == nil {
			e.version, e.mtime, e.ttlMs = st.Version, st.Mtime, decodeData(data).TTLms
			st, err = s.conn.Set(e.path, encodeData(r, waiting), e.version)
		}
	}
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
		s.forget(r.Token)
		return 0, fmt.Errorf("node %s gone: %w", redactPath(e.path), lease.ErrNotHeld)
	}
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", redactPath(e.path), err)
	}
	return st.Mtime, s.written(r, e, st)
}

// written records a write st of e's node, unless e's TTL had run out when
// it landed: the lease (or queue entry) had expired, so the node goes.
func (s *Store) written(r driver.Request, e *entry, st *zk.Stat) error {
	if st.Mtime >= e.mtime+e.ttlMs {
		s.forget(r.Token)
		_ = s.conn.Delete(e.path, st.Version) // else the next acquirer drops it
		return errExpired
	}
	e.version, e.mtime, e.ttlMs, e.czxid = st.Version, st.Mtime, r.TTL.Milliseconds(), st.Czxid
	return nil
}

// RenewMany implements driver.BatchRenewer: the leases this Store granted
// are renewed in as few multis as ZooKeeper's packet limit allows; a multi
// that fails (a lease is gone) is redone lease by lease, and so are the
// leases this Store does not know.
func (s *Store) RenewMany(ctx context.Context, rs []driver.Request) []error {
	errs := make([]error, len(rs))
	var batch []renewItem
	for i, r := range rs {
		if e, ok := s.remembered(r); ok && e.held {
			batch = append(batch, renewItem{i, e, encodeData(r, false)})
		} else {
			errs[i] = s.Renew(ctx, r)
		}
	}
	for len(batch) > 0 {
		if _, err := s.usable(ctx); err != nil {
			for _, it := range batch {
				errs[it.i] = err
			}
			break
		}
		n := multiFits(len(batch), func(k int) (int, int) { return len(batch[k].e.path), len(batch[k].data) })
		s.renewMulti(ctx, rs, batch[:n], errs)
		batch = batch[n:]
	}
	return errs
}

type renewItem struct {
	i    int // index in the requests
	e    entry
	data []byte
}

func (s *Store) renewMulti(ctx context.Context, rs []driver.Request, batch []renewItem, errs []error) {
	ops := make([]any, len(batch))
	for k, it := range batch {
		ops[k] = &zk.SetDataRequest{Path: it.e.path, Data: it.data, Version: it.e.version}
	}
	res, err := s.conn.Multi(ops...)
	if err != nil || len(res) != len(batch) {
		for _, it := range batch {
			errs[it.i] = s.Renew(ctx, rs[it.i])
		}
		return
	}
	for k, it := range batch {
		r := rs[it.i]
		if res[k].Stat == nil {
			errs[it.i] = s.Renew(ctx, r)
			continue
		}
		if werr := s.written(r, &it.e, res[k].Stat); werr != nil {
			errs[it.i] = fmt.Errorf("zklease: renew %q: %w", r.Key, werr)
			continue
		}
		s.remember(r.Token, it.e)
	}
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
	juteMaxBuffer   = 0xfffff
	multiBudget     = juteMaxBuffer - 64<<10
	multiReqFixed   = 4 + 8 + 9
	multiReqPerOp   = 9 + 4 + 4 + 4
	multiRespFixed  = 4 + 16 + 9
	multiRespPerOp  = 9 + 68
	maxMultiOpCount = (multiBudget - multiRespFixed) / multiRespPerOp
)

// multiFits returns how many of n renewals (the k-th with a path and data
// of the given lengths) the next multi carries: at least one.
func multiFits(n int, size func(k int) (path, data int)) int {
	req, k := multiReqFixed, 0
	for ; k < n && k < maxMultiOpCount; k++ {
		p, d := size(k)
		req += multiReqPerOp + p + d
		if k > 0 && req > multiBudget {
			break
		}
	}
	return k
}

// Release implements driver.Store: it deletes the token's node, the
// holder's or a queued entry (then lease.ErrNotHeld: it held nothing). The
// deletion wakes the waiter queued behind it.
func (s *Store) Release(ctx context.Context, r driver.Request) error {
	if _, err := s.usable(ctx); err != nil {
		return err
	}
	e, ok := s.remembered(r)
	if !ok {
		var err error
		if e, err = s.lookup(r); err != nil {
			return err
		}
	}
	s.forget(r.Token)
	err := s.conn.Delete(e.path, -1)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("zklease: release %q: node gone: %w", r.Key, lease.ErrNotHeld)
	case err != nil:
		return fmt.Errorf("zklease: release %q: %w", r.Key, err)
	case !e.held:
		return fmt.Errorf("zklease: release %q: the token left the queue: %w", r.Key, lease.ErrNotHeld)
	}
	return nil
}
