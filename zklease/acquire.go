// Acquire and Inspect: the lowest live node of a key's parent holds the key.

package zklease

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// maxRounds bounds the look-again loop of one Acquire or Inspect: each
// round follows the removal of a node below ours. maxClaim bounds the nodes
// a claim's multi checks, far below ZooKeeper's packet limit.
const (
	maxRounds = 64
	maxClaim  = 64
)

var (
	errBehind  = errors.New("zklease: a node ahead is still there")
	errExpired = fmt.Errorf("zklease: the TTL ran out before the write: %w", lease.ErrNotHeld)
)

// Acquire implements driver.Store. A token this Store knows is claimed in
// one write (claim); otherwise Acquire creates the token's node and settles.
func (s *Store) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	lost, err := s.usable(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	g, err := s.acquire(ctx, r)
	var held *lease.HeldError
	var full *lease.QueueFullError
	switch {
	case err == nil:
		g.Lost = lost
	case !errors.As(err, &held) && !errors.As(err, &full):
		err = fmt.Errorf("zklease: acquire %q: %w", r.Key, err)
	}
	return g, err
}

func (s *Store) acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if e, ok := s.remembered(r); ok {
		g, err := s.claim(r, e)
		if errors.Is(err, errBehind) {
			// Still queued: refresh the entry (another TTL, and the
			// server's time) and look again.
			var now int64
			if now, err = s.refresh(r, &e, true); err == nil {
				return s.settle(ctx, r, e, false, now)
			}
		}
		if !errors.Is(err, lease.ErrNotHeld) {
			return g, err
		}
		// Gone or expired: start again, at the back of the queue.
	}
	e, err := s.create(r)
	if err != nil {
		return driver.Grant{}, err
	}
	return s.settle(ctx, r, e, true, e.mtime)
}

// claim takes the key for r's entry e in one write if every node that was
// ahead of e at its last listing is gone: nodes are never created below an
// existing one, so e is then the lowest. Creating a node's path succeeds
// only if that node is gone, so the multi creates and deletes each of them
// and writes e (a new TTL), all or nothing; it fails with errBehind while
// one is there. For the holder it is a renewal.
func (s *Store) claim(r driver.Request, e entry) (driver.Grant, error) {
	if len(e.ahead) > maxClaim {
		return driver.Grant{}, errBehind
	}
	ops := make([]any, 0, 2*len(e.ahead)+1)
	for _, p := range e.ahead {
		ops = append(ops, &zk.CreateRequest{Path: p, Acl: s.acl}, &zk.DeleteRequest{Path: p, Version: -1})
	}
	ops = append(ops, &zk.SetDataRequest{Path: e.path, Data: encodeData(r, false), Version: e.version})
	res, err := s.conn.Multi(ops...)
	if err == nil && len(res) == len(ops) && res[len(ops)-1].Stat != nil {
		if err := s.written(r, &e, res[len(ops)-1].Stat); err != nil {
			return driver.Grant{}, err
		}
		e.held, e.marked, e.ahead = true, false, nil
		s.remember(r.Token, &e)
		return driver.Grant{Fence: uint64(e.czxid)}, nil
	}
	for _, x := range res {
		switch {
		case errors.Is(x.Error, zk.ErrNodeExists):
			return driver.Grant{}, errBehind
		case errors.Is(x.Error, zk.ErrNoNode), errors.Is(x.Error, zk.ErrBadVersion):
			s.remember(r.Token, nil)
			return driver.Grant{}, fmt.Errorf("node %s gone: %w", redactPath(e.path), lease.ErrNotHeld)
		}
	}
	if err == nil {
		err = errors.New("unexpected multi response")
	}
	return driver.Grant{}, fmt.Errorf("write %s: %w", redactPath(e.path), err)
}

// create makes r's ephemeral sequential node, in a multi with a write to
// the key's parent (created when missing) whose stat tells the node's czxid
// (the parent's pzxid) and the server's time (its mtime).
func (s *Store) create(r driver.Request) (entry, error) {
	parent := s.parent(r.Key)
	create := &zk.CreateRequest{Path: parent + "/" + nodePrefix + r.Token + "-", Data: encodeData(r, false), Acl: s.acl, Flags: zk.FlagEphemeralSequential}
	touch := &zk.SetDataRequest{Path: parent, Version: -1}
	res, err := s.conn.Multi(create, touch)
	if errors.Is(err, zk.ErrNoNode) {
		if err := s.ensureParent(parent); err != nil {
			return entry{}, err
		}
		res, err = s.conn.Multi(create, touch)
	}
	if err == nil && (len(res) != 2 || res[0].String == "" || res[1].Stat == nil) {
		err = errors.New("unexpected multi response")
	}
	if err != nil {
		return entry{}, fmt.Errorf("create a node under %s: %w", parent, err)
	}
	st := res[1].Stat
	return entry{key: r.Key, path: res[0].String, mtime: st.Mtime, ttlMs: r.TTL.Milliseconds(), czxid: st.Pzxid}, nil
}

// settle decides an acquisition once r's node e exists, written by this
// call at server time now (fresh: just created). e holds the key if it is
// the lowest node. Otherwise the lowest node is dropped if its TTL ran out
// (and settle looks again), or reported in a *lease.HeldError; a queued e
// stays as the token's entry, marked waiting; another fresh e is deleted.
func (s *Store) settle(ctx context.Context, r driver.Request, e entry, fresh bool, now int64) (driver.Grant, error) {
	parent := s.parent(r.Key)
	for range maxRounds {
		if err := ctx.Err(); err != nil {
			return driver.Grant{}, err
		}
		children, _, err := s.conn.Children(parent)
		if err != nil {
			return driver.Grant{}, fmt.Errorf("list %s: %w", parent, err)
		}
		nodes := sortNodes(children)
		i := 0
		for i < len(nodes) && nodes[i].token != r.Token {
			i++
		}
		switch {
		case i == len(nodes):
			s.remember(r.Token, nil)
			return driver.Grant{}, fmt.Errorf("our node %s vanished", redactPath(e.path))
		case parent+"/"+nodes[i].name != e.path:
			// An older node of the token (a create cut off by a connection
			// loss, or another Store's): keep that one.
			if err := s.conn.Delete(e.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return driver.Grant{}, fmt.Errorf("delete %s: %w", redactPath(e.path), err)
			}
			if e, err = s.read(r, parent+"/"+nodes[i].name, false); err == nil {
				now, err = s.refresh(r, &e, false)
			}
			if err != nil {
				return driver.Grant{}, err
			}
			fresh = false
			continue
		case i == 0 && e.marked:
			e.ahead = nil
			return s.claim(r, e) // clear the mark
		case i == 0:
			e.held = true
			s.remember(r.Token, &e)
			return driver.Grant{Fence: uint64(e.czxid)}, nil
		case fresh && r.Queue && i > s.maxWaiters: // i-1 waiters and the holder ahead
			if err := s.conn.Delete(e.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return driver.Grant{}, fmt.Errorf("delete %s: %w", redactPath(e.path), err)
			}
			return driver.Grant{}, &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters}
		}
		low := parent + "/" + nodes[0].name
		data, st, err := s.conn.Get(low)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		} else if err != nil {
			return driver.Grant{}, fmt.Errorf("read %s: %w", redactPath(low), err)
		}
		d := decodeData(data)
		if st.Mtime+d.TTLms <= now {
			// Not renewed for its TTL (its session may live on): drop it,
			// unless it was renewed since we read it.
			if err := s.conn.Delete(low, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
				return driver.Grant{}, fmt.Errorf("delete expired %s: %w", redactPath(low), err)
			}
			continue
		}
		watched := low // a queued waiter watches its predecessor only
		if r.Queue {
			watched = parent + "/" + nodes[i-1].name
		}
		if gone, err := s.watch(r, watched); err != nil || gone {
			if err != nil {
				return driver.Grant{}, err
			}
			continue
		}
		held := &lease.HeldError{Key: r.Key, Queued: i} // a waiting lowest node: reserved for it
		if !d.Waiting {
			held.Holder, held.Fence, held.Remaining, held.Queued = d.Holder, uint64(st.Czxid), d.remaining(st.Mtime, now), i-1
		}
		if r.Queue {
			if !e.marked {
				if _, err := s.refresh(r, &e, true); err != nil {
					return driver.Grant{}, err
				}
			}
			e.held, e.ahead = false, nil
			for _, n := range nodes[:i] {
				e.ahead = append(e.ahead, parent+"/"+n.name)
			}
			s.remember(r.Token, &e)
		} else if fresh {
			if err := s.conn.Delete(e.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return driver.Grant{}, fmt.Errorf("delete %s: %w", redactPath(e.path), err)
			}
		}
		return driver.Grant{}, held
	}
	return driver.Grant{}, fmt.Errorf("the nodes of %s kept changing for %d rounds", parent, maxRounds)
}

// Inspect implements driver.Store: the lowest node of key, unless its TTL
// ran out. A write to the key's parent comes first: it tells the server's
// time, and the reads after it see every write completed before Inspect.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if _, err := s.usable(ctx); err != nil {
		return driver.Info{}, err
	}
	parent := s.parent(key)
	for range maxRounds {
		pst, err := s.conn.Set(parent, nil, -1)
		var children []string
		if err == nil {
			children, _, err = s.conn.Children(parent)
		}
		nodes := sortNodes(children)
		if errors.Is(err, zk.ErrNoNode) || err == nil && len(nodes) == 0 {
			return driver.Info{Key: key}, nil
		}
		var data []byte
		st := &zk.Stat{}
		if err == nil {
			data, st, err = s.conn.Get(parent + "/" + nodes[0].name)
		}
		if errors.Is(err, zk.ErrNoNode) {
			continue
		} else if err != nil {
			return driver.Info{}, fmt.Errorf("zklease: inspect %q: %w", key, err)
		}
		if d := decodeData(data); !d.Waiting && st.Mtime+d.TTLms > pst.Mtime {
			return driver.Info{Key: key, Held: true, Holder: d.Holder, Fence: uint64(st.Czxid), Remaining: d.remaining(st.Mtime, pst.Mtime)}, nil
		}
		return driver.Info{Key: key}, nil
	}
	return driver.Info{}, fmt.Errorf("zklease: inspect %q: the nodes kept changing", key)
}
