// Acquire and Inspect: create a holder node, then the lowest live node of
// the key's parent holds the key.

package zklease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
)

// maxRounds bounds the look-again loop of one Acquire or Inspect: each round
// follows the removal of a node below ours, which only a bounded number of
// other clients can cause.
const maxRounds = 64

// Acquire implements lease.Store. It creates our holder node (ephemeral,
// sequential, named after the token) in one round trip that also tells the
// fence and the server's time, lists the key's holder nodes, and grants the
// key if ours is the lowest. Otherwise it looks at the lowest node: if its
// holder stopped renewing for its TTL it deletes it (version-checked) and
// looks again; if it is live it deletes ours and returns a *lease.HeldError.
// A key free of nodes costs two round trips; a held key four (five while a
// subscription is open: the watch on the holder's node).
func (s *Store) Acquire(ctx context.Context, r lease.Request) (lease.Grant, error) {
	if err := s.check(ctx, r, true); err != nil {
		return lease.Grant{}, err
	}
	lost := s.lostChan()
	// The same token again through this store: refresh the node it granted.
	if g, ok := s.remembered(r); ok {
		st, err := s.refresh(r, g)
		switch {
		case err == nil:
			return lease.Grant{Fence: uint64(st.Czxid), Lost: lost}, nil
		case !errors.Is(err, lease.ErrNotHeld):
			return lease.Grant{}, fmt.Errorf("zklease: acquire %q: %w", r.Key, err)
		}
		// Expired or gone: acquire anew.
	}
	parent := s.parent(r.Key)
	ours, pst, err := s.create(parent, r)
	if err != nil {
		return lease.Grant{}, fmt.Errorf("zklease: acquire %q: %w", r.Key, err)
	}
	// The create and a write to the parent ran in one transaction: the
	// parent's pzxid is our node's czxid and its mtime our node's ctime.
	g, err := s.settle(ctx, r, parent, ours, pst.Pzxid, pst.Mtime)
	if err != nil {
		var held *lease.HeldError
		if errors.As(err, &held) {
			return lease.Grant{}, err
		}
		return lease.Grant{}, fmt.Errorf("zklease: acquire %q: %w", r.Key, err)
	}
	g.Lost = lost
	return g, nil
}

// create makes r's holder node under parent, creating the parent when it is
// missing, in a multi with a write to the parent, and returns the node's
// path and the parent's stat after the transaction.
func (s *Store) create(parent string, r lease.Request) (string, *zk.Stat, error) {
	create := &zk.CreateRequest{Path: parent + "/" + nodePrefix(r.Token), Data: encodeData(r), Acl: s.acl, Flags: zk.FlagEphemeralSequential}
	touch := &zk.SetDataRequest{Path: parent, Data: nil, Version: -1}
	for attempt := 0; ; attempt++ {
		res, err := s.conn.Multi(create, touch)
		if errors.Is(err, zk.ErrNoNode) && attempt < 2 {
			// The parent is missing (new key, or its empty container was
			// just removed by the server): create it and try once more.
			if err := s.ensureParent(parent); err != nil {
				return "", nil, err
			}
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("create a holder node under %s: %w", parent, err)
		}
		if len(res) != 2 || res[0].String == "" || res[1].Stat == nil {
			return "", nil, fmt.Errorf("create a holder node under %s: unexpected multi response", parent)
		}
		return res[0].String, res[1].Stat, nil
	}
}

// settle decides an acquisition once our node exists: ours is the node we
// created, fence its czxid and now its creation time (server ms).
func (s *Store) settle(ctx context.Context, r lease.Request, parent, ours string, fence, now int64) (lease.Grant, error) {
	oursName := ours[len(parent)+1:]
	for range maxRounds {
		if err := ctx.Err(); err != nil {
			return lease.Grant{}, err
		}
		children, _, err := s.conn.Children(parent)
		if err != nil {
			return lease.Grant{}, fmt.Errorf("list %s: %w", parent, err)
		}
		nodes := sortNodes(children)
		var mine, older *node
		for i := range nodes {
			switch {
			case nodes[i].name == oursName:
				mine = &nodes[i]
			case nodes[i].token == r.Token && older == nil:
				older = &nodes[i]
			}
		}
		if mine == nil {
			return lease.Grant{}, fmt.Errorf("our holder node %s vanished (session expired?)", ours)
		}
		if older != nil {
			// The token already has a node: an acquire of the same token
			// through another store (or session).
			if nodes[0].name == older.name {
				if err := s.conn.Delete(ours, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					return lease.Grant{}, fmt.Errorf("delete %s: %w", ours, err)
				}
				return s.reacquire(r, parent+"/"+older.name)
			}
			// A stale node of ours that never held: remove it.
			if err := s.conn.Delete(parent+"/"+older.name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return lease.Grant{}, fmt.Errorf("delete %s: %w", older.name, err)
			}
			continue
		}
		low := nodes[0]
		if low.name == oursName {
			s.remember(r, ours, &zk.Stat{Version: 0, Mtime: now})
			return lease.Grant{Fence: uint64(fence)}, nil
		}
		lowPath := parent + "/" + low.name
		data, st, err := s.conn.Get(lowPath)
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile: look again
		}
		if err != nil {
			return lease.Grant{}, fmt.Errorf("read %s: %w", lowPath, err)
		}
		d := decodeData(data)
		if d.expiresAt(st.Mtime) <= now {
			// Its holder has not renewed for its TTL (its session may live
			// on): take it away, unless it was renewed since we read it.
			err := s.conn.Delete(lowPath, st.Version)
			if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
				return lease.Grant{}, fmt.Errorf("delete expired %s: %w", lowPath, err)
			}
			continue
		}
		if s.watching() {
			// Wake subscribers when the holder's node goes. A child watch on
			// a node without children fires only on its deletion (a data
			// watch would fire on every renewal).
			_, _, ch, err := s.conn.ChildrenW(lowPath)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return lease.Grant{}, fmt.Errorf("watch %s: %w", lowPath, err)
			}
			s.addWatch(ch, r.Key)
		}
		if err := s.conn.Delete(ours, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			// Not a HeldError: the Client then releases our token, so the
			// node cannot hold the key for nobody later.
			return lease.Grant{}, fmt.Errorf("delete %s: %w", ours, err)
		}
		return lease.Grant{}, &lease.HeldError{
			Key:       r.Key,
			Holder:    d.Holder,
			Fence:     uint64(st.Czxid),
			Remaining: remaining(d, st.Mtime, now),
		}
	}
	return lease.Grant{}, fmt.Errorf("the holder nodes of %s kept changing for %d rounds", parent, maxRounds)
}

// reacquire refreshes the node path that r's token already holds.
func (s *Store) reacquire(r lease.Request, path string) (lease.Grant, error) {
	data, st, err := s.conn.Get(path)
	if errors.Is(err, zk.ErrNoNode) {
		return lease.Grant{}, fmt.Errorf("the token's holder node %s vanished", path)
	}
	if err != nil {
		return lease.Grant{}, fmt.Errorf("read %s: %w", path, err)
	}
	g := grant{key: r.Key, path: path, version: st.Version, mtime: st.Mtime, ttlMs: decodeData(data).TTLms}
	st, err = s.refresh(r, g)
	if err != nil {
		return lease.Grant{}, err
	}
	return lease.Grant{Fence: uint64(st.Czxid)}, nil
}

// remaining is the time a node written at mtime has left at server time now.
func remaining(d nodeData, mtime, now int64) time.Duration {
	ms := min(max(d.expiresAt(mtime)-now, 0), d.TTLms)
	return time.Duration(ms) * time.Millisecond
}

// Inspect implements lease.Store: the lowest holder node of key, unless its
// TTL ran out. It costs three round trips, one of them a write to the key's
// parent node, which is how the Store learns the server's time.
func (s *Store) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if err := ctx.Err(); err != nil {
		return lease.Info{}, err
	}
	if key == "" {
		return lease.Info{}, lease.Invalid("key", "empty")
	}
	free := lease.Info{Key: key}
	parent := s.parent(key)
	for range maxRounds {
		children, _, err := s.conn.Children(parent)
		if errors.Is(err, zk.ErrNoNode) {
			return free, nil
		}
		if err != nil {
			return lease.Info{}, fmt.Errorf("zklease: inspect %q: %w", key, err)
		}
		nodes := sortNodes(children)
		if len(nodes) == 0 {
			return free, nil
		}
		lowPath := parent + "/" + nodes[0].name
		data, st, err := s.conn.Get(lowPath)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return lease.Info{}, fmt.Errorf("zklease: inspect %q: %w", key, err)
		}
		pst, err := s.conn.Set(parent, nil, -1)
		if errors.Is(err, zk.ErrNoNode) {
			return free, nil
		}
		if err != nil {
			return lease.Info{}, fmt.Errorf("zklease: inspect %q: %w", key, err)
		}
		d := decodeData(data)
		if d.expiresAt(st.Mtime) <= pst.Mtime {
			return lease.Info{Key: key, Fence: uint64(st.Czxid)}, nil
		}
		return lease.Info{Key: key, Held: true, Holder: d.Holder, Fence: uint64(st.Czxid), Remaining: remaining(d, st.Mtime, pst.Mtime)}, nil
	}
	return lease.Info{}, fmt.Errorf("zklease: inspect %q: the holder nodes kept changing", key)
}
