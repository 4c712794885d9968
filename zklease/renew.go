// Renew, RenewMany and Release: writes to the node named after the token,
// version-checked, with the server's time of the write telling whether the
// lease (or the queue entry) had already expired.

package zklease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
)

var errExpired = fmt.Errorf("the lease's TTL ran out before the renewal: %w", lease.ErrNotHeld)

// Renew implements lease.Store: one version-checked write of the holder
// node's data, which moves its mtime (the TTL's origin) to now. A node that
// is gone (released, taken over after its TTL, or deleted with its session)
// or whose TTL had run out before this write gives lease.ErrNotHeld, and so
// does a token that is only queued. One round trip for a lease granted by
// this Store; three otherwise (find the node by its token, read it, write
// it).
func (s *Store) Renew(ctx context.Context, r lease.Request) error {
	if err := s.check(ctx, r, true); err != nil {
		return err
	}
	g, ok := s.remembered(r)
	if !ok {
		var err error
		if g, err = s.lookup(r, true); err != nil {
			return err
		}
	}
	if g.waiting {
		return fmt.Errorf("zklease: renew %q: the token is queued, not holding: %w", r.Key, lease.ErrNotHeld)
	}
	if _, err := s.refresh(r, g); err != nil {
		return fmt.Errorf("zklease: renew %q: %w", r.Key, err)
	}
	return nil
}

// lookup finds r's node by its token (and reads it when stat is set: the
// grant is then marked waiting unless the node holds the key, i.e. it is the
// lowest and not a queue entry).
func (s *Store) lookup(r lease.Request, stat bool) (grant, error) {
	parent := s.parent(r.Key)
	children, _, err := s.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return grant{}, fmt.Errorf("zklease: %q has no holder: %w", r.Key, lease.ErrNotHeld)
	}
	if err != nil {
		return grant{}, fmt.Errorf("zklease: list %s: %w", parent, err)
	}
	for i, n := range sortNodes(children) {
		if n.token != r.Token {
			continue
		}
		g := grant{key: r.Key, path: parent + "/" + n.name}
		if !stat {
			return g, nil
		}
		data, st, err := s.conn.Get(g.path)
		if errors.Is(err, zk.ErrNoNode) {
			break
		}
		if err != nil {
			return grant{}, fmt.Errorf("zklease: read %s: %w", redactPath(g.path), err)
		}
		d := decodeData(data)
		g.version, g.mtime, g.ttlMs, g.waiting, g.marked, g.czxid = st.Version, st.Mtime, d.TTLms, d.Waiting || i > 0, d.Waiting, st.Czxid
		return g, nil
	}
	return grant{}, fmt.Errorf("zklease: %q is not held by this token: %w", r.Key, lease.ErrNotHeld)
}

// refresh writes r's data to g's node if its version is still g.version
// (re-reading it once if another store of the same token wrote it) and
// checks the TTL had not run out before the write. g.waiting says what the
// node becomes: a queue entry, or the holder; a queue entry is marked
// waiting unless r.RecordLater (the Client's entries carry no mark).
func (s *Store) refresh(r lease.Request, g grant) (*zk.Stat, error) {
	g.marked = g.waiting && !r.RecordLater
	g.wrote = time.Now()
	st, err := s.conn.Set(g.path, encodeData(r, g.marked), g.version)
	if errors.Is(err, zk.ErrBadVersion) {
		data, cur, gerr := s.conn.Get(g.path)
		switch {
		case errors.Is(gerr, zk.ErrNoNode):
			err = gerr
		case gerr != nil:
			return nil, fmt.Errorf("read %s: %w", redactPath(g.path), gerr)
		default:
			g.version, g.mtime, g.ttlMs = cur.Version, cur.Mtime, decodeData(data).TTLms
			g.wrote = time.Now()
			st, err = s.conn.Set(g.path, encodeData(r, g.marked), g.version)
		}
	}
	if errors.Is(err, zk.ErrNoNode) {
		s.forget(r.Token)
		return nil, fmt.Errorf("node gone: %w", lease.ErrNotHeld)
	}
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", redactPath(g.path), err)
	}
	return st, s.written(r, g, st)
}

// written checks a successful write st of g's node: if the TTL had run out
// before it (an acquirer could have taken the key, or dropped the queue
// entry), the lease is not held and the node is deleted; otherwise the store
// remembers the new version.
func (s *Store) written(r lease.Request, g grant, st *zk.Stat) error {
	if st.Mtime >= g.mtime+g.ttlMs {
		s.forget(r.Token)
		_ = s.conn.Delete(g.path, st.Version) // else the next acquirer removes it
		return errExpired
	}
	g.version, g.mtime, g.czxid = st.Version, st.Mtime, st.Czxid
	s.remember(r, g)
	return nil
}

// RenewMany implements lease.BatchRenewer: version-checked writes for every
// lease this Store granted, in as few multis as ZooKeeper's packet limit
// allows (one round trip each; see multiBudget). A multi is
// all-or-nothing: when one write fails (a lease is gone), that lease is
// renewed alone (to learn its error) and the multi is sent again without it.
// Leases this Store did not grant are renewed one by one.
func (s *Store) RenewMany(ctx context.Context, rs []lease.Request) []error {
	errs := make([]error, len(rs))
	var batch []renewItem
	for i, r := range rs {
		if err := s.check(ctx, r, true); err != nil {
			errs[i] = err
			continue
		}
		if g, ok := s.remembered(r); ok && !g.waiting {
			batch = append(batch, renewItem{i, g, encodeData(r, false)})
			continue
		}
		errs[i] = s.Renew(ctx, r)
	}
	// ZooKeeper refuses a packet larger than jute.maxbuffer (1 MiB by
	// default) and drops the connection: renew in multis as large as that
	// allows, one round trip each.
	for len(batch) > 0 {
		n := multiFits(len(batch), func(k int) (path, data int) {
			return len(batch[k].g.path), len(batch[k].data)
		})
		s.renewMulti(ctx, rs, batch[:n:n], errs)
		batch = batch[n:]
	}
	return errs
}

// The size of a renewal multi. ZooKeeper reads a packet (a request on the
// server, a response on the client; its 4-byte length prefix excluded) only
// if it is at most jute.maxbuffer bytes, 0xfffff by default; a larger one
// closes the connection. Both sides of a multi of SetData are counted
// exactly from its jute encoding:
//
//	request:  length 4 + header (xid, type) 8 + per op [MultiHeader (type,
//	          done, err) 9 + path (4 + len) + data (4 + len) + version 4]
//	          + the closing MultiHeader 9
//	response: length 4 + header (xid, zxid, err) 16 + per op [MultiHeader 9
//	          + Stat 68] + the closing MultiHeader 9
//
// so a renewal costs 21 + len(path) + len(data) request bytes and 77
// response bytes. multiBudget keeps both under the limit with a margin of
// 64 KiB for what wraps the request on its way through the ensemble (a
// follower forwards it to the leader in a quorum packet with the session's
// auth data; the leader logs and proposes the transaction).
const (
	juteMaxBuffer   = 0xfffff
	multiBudget     = juteMaxBuffer - 64<<10
	multiReqFixed   = 4 + 8 + 9
	multiReqPerOp   = 9 + 4 + 4 + 4 // plus the path and the data
	multiRespFixed  = 4 + 16 + 9
	multiRespPerOp  = 9 + 68
	maxMultiOpCount = (multiBudget - multiRespFixed) / multiRespPerOp // the response's bound
)

// multiFits returns how many of n renewals, the k-th with a path and data
// of the given lengths, the next multi carries: as many as keep its request
// and its response within multiBudget, and always at least one.
func multiFits(n int, size func(k int) (path, data int)) int {
	req := multiReqFixed
	k := 0
	for ; k < n && k < maxMultiOpCount; k++ {
		p, d := size(k)
		req += multiReqPerOp + p + d
		if k > 0 && req > multiBudget {
			break
		}
	}
	return k
}

// renewMulti renews batch in one multi; a lease that fails there (gone, or
// renewed elsewhere) is renewed alone and the multi re-sent without it.
func (s *Store) renewMulti(ctx context.Context, rs []lease.Request, batch []renewItem, errs []error) {
	for len(batch) > 0 {
		if err := ctx.Err(); err != nil {
			for _, it := range batch {
				errs[it.i] = err
			}
			break
		}
		ops := make([]any, len(batch))
		for k, it := range batch {
			ops[k] = &zk.SetDataRequest{Path: it.g.path, Data: it.data, Version: it.g.version}
		}
		sent := time.Now()
		res, err := s.conn.Multi(ops...)
		if err == nil && len(res) == len(batch) {
			for k, it := range batch {
				it.g.wrote, it.g.marked = sent, false
				if res[k].Stat == nil {
					errs[it.i] = errors.New("zklease: renew: multi response without a stat")
					continue
				}
				if werr := s.written(rs[it.i], it.g, res[k].Stat); werr != nil {
					errs[it.i] = fmt.Errorf("zklease: renew %q: %w", rs[it.i].Key, werr)
				}
			}
			break
		}
		failed := -1
		for k := range res {
			if errors.Is(res[k].Error, zk.ErrNoNode) || errors.Is(res[k].Error, zk.ErrBadVersion) {
				failed = k
				break
			}
		}
		if failed < 0 {
			if err == nil {
				err = errors.New("unexpected multi response")
			}
			for _, it := range batch {
				errs[it.i] = fmt.Errorf("zklease: renew: %w", err)
			}
			break
		}
		it := batch[failed]
		errs[it.i] = s.Renew(ctx, rs[it.i])
		batch = append(batch[:failed], batch[failed+1:]...)
	}
}

// renewItem is a lease of a RenewMany call that a multi can renew: its index
// in the requests, its node and the data the renewal writes.
type renewItem struct {
	i    int
	g    grant
	data []byte
}

// Release implements lease.Store: it deletes the node named after r's
// token, the holder's or a queued waiter's (which leaves the queue; Release
// then reports lease.ErrNotHeld, the token held nothing). The name holds the
// token, so the path alone identifies our node; the delete is not
// version-checked (each renewal moves the version). The deletion fires the
// watch of the waiter queued behind, if any. One round trip for a node this
// Store made, three otherwise (find it by its token, read it, delete it).
func (s *Store) Release(ctx context.Context, r lease.Request) error {
	if err := s.check(ctx, r, false); err != nil {
		return err
	}
	g, ok := s.remembered(r)
	if !ok {
		var err error
		if g, err = s.lookup(r, true); err != nil {
			return err
		}
	}
	err := s.conn.Delete(g.path, -1)
	if errors.Is(err, zk.ErrNoNode) {
		s.forget(r.Token)
		return fmt.Errorf("zklease: release %q: holder node gone: %w", r.Key, lease.ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("zklease: release %q: %w", r.Key, err)
	}
	s.forget(r.Token)
	if g.waiting {
		return fmt.Errorf("zklease: release %q: the token left the queue; it held nothing: %w", r.Key, lease.ErrNotHeld)
	}
	return nil
}
