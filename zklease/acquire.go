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
// round follows the removal of a node below ours.
const maxRounds = 64

var errExpired = fmt.Errorf("zklease: the TTL ran out before the write: %w", lease.ErrNotHeld)

// Acquire implements driver.Store: the token's node (its entry, or a new
// one) holds the key once it is the lowest.
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
	e, ok := s.remembered(r)
	if ok && e.held { // a retried Acquire: a renewal
		if _, err := s.refresh(r, &e); err != nil {
			return driver.Grant{}, err
		}
		s.remember(r.Token, &e)
		return driver.Grant{Fence: uint64(e.czxid)}, nil
	}
	if !ok {
		var err error
		if e, err = s.create(r); err != nil {
			return driver.Grant{}, err
		}
	}
	return s.settle(ctx, r, e, !ok)
}

// create makes r's ephemeral sequential node, in a multi with a write to
// the key's parent (created when missing) whose stat tells the node's czxid
// (the parent's pzxid) and the server's time (its mtime).
func (s *Store) create(r driver.Request) (entry, error) {
	parent := s.parent(r.Key)
	create := &zk.CreateRequest{Path: parent + "/" + nodePrefix + r.Token + "-", Data: encodeData(r), Acl: s.acl, Flags: zk.FlagEphemeralSequential}
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

// settle decides an acquisition once r's node e exists (fresh: created by
// this call). e holds the key if it is the lowest node: a queued entry then
// holds it on the write of the call that last refreshed it
// (Grant.FromQueue), with no write now, so a hand-off costs one listing.
// Otherwise the lowest node is dropped if its TTL ran out (and settle looks
// again), or reported in a *lease.HeldError; a queued e stays as the
// token's entry, refreshed; another fresh e is deleted.
func (s *Store) settle(ctx context.Context, r driver.Request, e entry, fresh bool) (driver.Grant, error) {
	parent := s.parent(r.Key)
	now, wrote := e.mtime, fresh // the server's time of this call's write
	for range maxRounds {
		if err := ctx.Err(); err != nil {
			return driver.Grant{}, err
		}
		children, _, err := s.conn.Children(parent)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return driver.Grant{}, fmt.Errorf("list %s: %w", parent, err)
		}
		nodes := sortNodes(children)
		i := 0
		for i < len(nodes) && nodes[i].token != r.Token {
			i++
		}
		switch {
		case i == len(nodes) && fresh:
			s.remember(r.Token, nil)
			return driver.Grant{}, fmt.Errorf("our node %s vanished", redactPath(e.path))
		case i == len(nodes): // the entry expired and was dropped: queue again
			s.remember(r.Token, nil)
			if e, err = s.create(r); err != nil {
				return driver.Grant{}, err
			}
			now, wrote, fresh = e.mtime, true, true
			continue
		case parent+"/"+nodes[i].name != e.path:
			// An older node of the token (a create cut off by a connection
			// loss, or another Store's): keep that one.
			if err := s.conn.Delete(e.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return driver.Grant{}, fmt.Errorf("delete %s: %w", redactPath(e.path), err)
			}
			if e, err = s.read(r, parent+"/"+nodes[i].name, false); err == nil {
				now, err = s.refresh(r, &e)
			}
			if err != nil {
				return driver.Grant{}, err
			}
			wrote, fresh = true, false
			continue
		case i == 0:
			e.held = true
			s.remember(r.Token, &e)
			return driver.Grant{Fence: uint64(e.czxid), FromQueue: !wrote}, nil
		case fresh && r.Queue && i > s.maxWaiters: // i-1 waiters and the holder ahead
			if err := s.conn.Delete(e.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return driver.Grant{}, fmt.Errorf("delete %s: %w", redactPath(e.path), err)
			}
			return driver.Grant{}, &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters}
		}
		if !wrote { // refresh the entry: another TTL, and the server's time
			if now, err = s.refresh(r, &e); err != nil {
				return driver.Grant{}, err
			}
			wrote = true
		}
		// The node right behind the lowest judges it (and, by turns, every
		// node): dropped if its TTL ran out, else reported.
		held, low := &lease.HeldError{Key: r.Key, Queued: i - 1}, parent+"/"+nodes[0].name
		if i == 1 || !r.Queue {
			data, st, err := s.conn.Get(low)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			} else if err != nil {
				return driver.Grant{}, fmt.Errorf("read %s: %w", redactPath(low), err)
			}
			d := decodeData(data)
			if st.Mtime+d.TTLms <= now {
				// Not renewed for its TTL (its session may live on): drop
				// it, unless it was renewed since we read it.
				if err := s.conn.Delete(low, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
					return driver.Grant{}, fmt.Errorf("delete expired %s: %w", redactPath(low), err)
				}
				continue
			}
			held.Holder, held.Fence, held.Remaining = d.Holder, uint64(st.Czxid), d.remaining(st.Mtime, now)
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
		if r.Queue {
			s.remember(r.Token, &e)
		} else if err := s.conn.Delete(e.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return driver.Grant{}, fmt.Errorf("delete %s: %w", redactPath(e.path), err)
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
		if d := decodeData(data); st.Mtime+d.TTLms > pst.Mtime {
			return driver.Info{Key: key, Held: true, Holder: d.Holder, Fence: uint64(st.Czxid), Remaining: d.remaining(st.Mtime, pst.Mtime)}, nil
		}
		return driver.Info{Key: key}, nil
	}
	return driver.Info{}, fmt.Errorf("zklease: inspect %q: the nodes kept changing", key)
}
