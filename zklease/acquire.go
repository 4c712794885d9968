// Acquire and Inspect: the lowest live node of a key's parent holds the key,
// with the readers right behind it if it is a reader's.

package zklease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// maxRounds bounds the look-again loop of one Acquire: each
// round follows the removal of a node below ours.
const maxRounds = 64

var (
	errExpired = fmt.Errorf("zklease: the TTL ran out before the write: %w", lease.ErrNotHeld)
	errAgain   = errors.New("zklease: the node is gone, look again")
)

// Acquire implements driver.Store: the token's node (its entry, or a new
// one) holds the key once it is the lowest.
func (s *Store) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	lost, err := s.usable(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	var g driver.Grant
	if e, ok := s.remembered(r); ok && e.held { // a retried Acquire: a renewal
		if _, err = s.refresh(r, &e); err == nil {
			g.Fence = e.fence()
		}
	} else {
		g, err = s.settle(ctx, r, e, 0)
	}
	if err == nil {
		g.Lost = lost
	}
	return g, acquireErr(r, err)
}

// acquireErr names r's key in err, unless it is nil or a refusal (whose
// type says it).
func acquireErr(r driver.Request, err error) error {
	if err != nil && !errors.As(err, new(*lease.HeldError)) && !errors.As(err, new(*lease.QueueFullError)) {
		err = fmt.Errorf("zklease: acquire %q: %w", r.Key, err)
	}
	return err
}

// createOps returns the multi that makes r's ephemeral sequential node: its
// create, then a write to the key's parent whose stat tells the node's
// czxid (the parent's pzxid), the server's time (its mtime) and whether the
// node is the key's only child (see created).
func (s *Store) createOps(r driver.Request) (*zk.CreateRequest, *zk.SetDataRequest) {
	parent := s.parent(r.Key)
	name := nodePrefix + r.Token
	if r.Shared {
		name += readMark
	}
	return &zk.CreateRequest{Path: parent + "/" + name + "-", Data: encodeData(r, 0), Acl: s.acl, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: parent, Version: -1}
}

// created returns the entry that createOps' multi made for r from the
// results of its two ops, and whether its node was the key's only child
// then: no other holder, waiter or tombstone, so it holds the key.
func created(r driver.Request, create, touch zk.MultiResponse) (entry, bool, error) {
	if create.String == "" || touch.Stat == nil {
		return entry{}, false, errors.New("unexpected multi response")
	}
	st := touch.Stat
	e := entry{key: r.Key, path: create.String, mtime: st.Mtime, ttlMs: r.TTL.Milliseconds(), czxid: st.Pzxid}
	return e, st.NumChildren == 1, nil
}

// create makes r's node (createNodes), and returns its entry and whether
// it is the key's only node.
func (s *Store) create(r driver.Request) (entry, bool, error) {
	es, alone, err := s.createNodes([]driver.Request{r})
	if err != nil {
		return entry{}, false, fmt.Errorf("create a node under %s: %w", s.parent(r.Key), err)
	}
	return es[0], alone[0], nil
}

// createNodes makes the nodes of rs (createOps) in one multi, and returns
// each one's entry and whether it is its key's only node. A missing parent
// fails the multi as a whole, and the answer names the first failed op
// only: the parents from that op's on are created (a request each) and the
// multi sent once more (why not once per parent: docs/stores.md, ZooKeeper,
// Batches).
func (s *Store) createNodes(rs []driver.Request) ([]entry, []bool, error) {
	ops := make([]any, 0, 2*len(rs))
	for _, r := range rs {
		create, touch := s.createOps(r)
		ops = append(ops, create, touch)
	}
	res, err := s.conn.Multi(ops...)
	if errors.Is(err, zk.ErrNoNode) {
		err = nil
		for j := max(failedOp(res), 0) / 2; j < len(rs) && err == nil; j++ {
			err = s.ensureParent(s.parent(rs[j].Key))
		}
		if err == nil {
			res, err = s.conn.Multi(ops...)
		}
	}
	if err == nil && len(res) != len(ops) {
		err = errors.New("unexpected multi response")
	}
	if err != nil {
		return nil, nil, err
	}
	es, alone := make([]entry, len(rs)), make([]bool, len(rs))
	for j, r := range rs {
		if es[j], alone[j], err = created(r, res[2*j], res[2*j+1]); err != nil {
			return nil, nil, err
		}
	}
	return es, alone, nil
}

// failedOp returns the index of the op that failed a multi, or -1: the
// first with an error (the ops after it have one too, "runtime
// inconsistency"; those before it none).
func failedOp(res []zk.MultiResponse) int {
	for k, r := range res {
		if r.Error != nil {
			return k
		}
	}
	return -1
}

// settle decides an acquisition with r's entry e (none yet: e.path is
// empty, and settle creates the node). e holds the key if it is the lowest
// node, or a reader's behind readers only (join): a queued entry then holds
// it on the write of the call that last refreshed it (Grant.FromQueue),
// with no write now, so a hand-off costs one listing; a node created as
// the key's only child holds it with no listing. Otherwise the nodes
// that hold the key are dropped if their TTL ran out (and settle looks
// again), or reported in a *lease.HeldError; a queued e stays as the
// token's entry, refreshed; another e is deleted. now is the server's time
// of this call's write (e's creation), 0 if none yet.
func (s *Store) settle(ctx context.Context, r driver.Request, e entry, now int64) (driver.Grant, error) {
	parent := s.parent(r.Key)
	for range maxRounds {
		err := ctx.Err()
		if err == nil && e.path == "" {
			var alone bool
			e, alone, err = s.create(r)
			now = e.mtime
			if err == nil && alone {
				return s.hold(r, e, now), nil
			}
		}
		var nodes []node
		i := -1
		if err == nil {
			nodes, i, err = s.nodes(parent, r.Token)
		}
		if err == nil && i >= 0 && nodes[i].path != e.path {
			// An older node of the token (a create cut off by a connection
			// loss, or another Store's): keep that one.
			if err = s.dropped(e.path, -1, nil); err == nil {
				e, err = s.read(r.Key, nodes[i].path, false)
			}
			if err == nil {
				now, err = s.refresh(r, &e)
			}
		}
		if err == nil && i > 0 && now == 0 { // refresh our queued entry: another TTL, and the server's time
			now, err = s.refresh(r, &e)
		}
		h := lead(nodes) // the nodes that hold the key
		switch {
		case err != nil:
			return driver.Grant{}, err
		case i < 0: // our node is gone (its TTL ran out): queue again
			s.entries.Delete(r.Token)
			e.path = ""
			continue
		case i < h:
			if err = s.join(r, &e, nodes[:h], &now); err == errAgain {
				continue
			} else if err != nil {
				return driver.Grant{}, err
			}
			return s.hold(r, e, now), nil
		case r.Queue && i-h >= s.maxWaiters: // never an entry queued before
			return driver.Grant{}, s.dropped(e.path, -1, &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters})
		}
		// A reader watches the nearest writer ahead; a queued writer its
		// predecessor only (and is the next to get the key); another try the
		// lowest node. The first waiter, and every try, judges the holders:
		// dropped if their TTL ran out, else reported.
		j, next := 0, ""
		if nodes[i].shared {
			for j = i - 1; nodes[j].shared; j-- {
			}
		} else if r.Queue {
			j, next = i-1, r.Token
		}
		var info driver.Info
		if !r.Queue || i == h {
			if info, _, err = s.heads(r.Key, nodes[:h], "", now, true); err == nil && !info.Held {
				err = errAgain
			}
		}
		if err == nil {
			err = s.watch(r.Key, next, nodes[j].path)
		}
		if err == errAgain {
			continue
		} else if err != nil {
			return driver.Grant{}, err
		}
		held := &lease.HeldError{Key: r.Key, Holder: info.Holder, Fence: info.Fence, Remaining: info.Remaining, Queued: i - h}
		if !r.Queue {
			return driver.Grant{}, s.dropped(e.path, -1, held)
		}
		s.entries.Store(r.Token, e)
		return driver.Grant{}, held
	}
	return driver.Grant{}, fmt.Errorf("the nodes of %s kept changing for %d rounds", parent, maxRounds)
}

// hold records e as r's held entry and returns its grant; now is the
// server's time of the call's write, 0 if it made none (a queued entry's
// turn: see settle).
func (s *Store) hold(r driver.Request, e entry, now int64) driver.Grant {
	e.held = true
	s.entries.Store(r.Token, e)
	return driver.Grant{Fence: e.fence(), FromQueue: now == 0}
}

// join gives e, a node of run (the nodes that hold the key), its fence:
// its czxid if it is not a reader's or no other reader of run is live,
// else the read epoch's, the lowest fence of the others, which a write
// records in e's node if that fence's node still exists (else errAgain).
// now is the server's time of the call's last write.
func (s *Store) join(r driver.Request, e *entry, run []node, now *int64) error {
	if e.epoch != 0 || len(run) == 1 {
		return nil
	}
	info, src, err := s.heads(r.Key, run, e.path, *now, true)
	if err != nil || !info.Held || info.Fence >= uint64(e.czxid) {
		return err
	}
	epoch := int64(info.Fence)
	res, err := s.conn.Multi(&zk.SetDataRequest{Path: e.path, Data: encodeData(r, epoch), Version: -1}, &zk.CheckVersionRequest{Path: src, Version: -1})
	if errors.Is(err, zk.ErrNoNode) {
		return errAgain
	} else if err == nil && (len(res) != 2 || res[0].Stat == nil) {
		err = errors.New("unexpected multi response")
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", redactPath(e.path), err)
	}
	e.epoch, *now = epoch, res[0].Stat.Mtime
	return s.written(r, e, res[0].Stat)
}

// heads reads run, nodes that hold key together, and judges their TTLs at
// the server's time now (ms). An expired node holds nothing and, if drop,
// is deleted unless renewed since it was read (its session may live on).
// Info tells the lowest fence (the read epoch's, of node src) and its
// holder, and the longest TTL left; errAgain: all are gone. For a joiner
// (skip: its node), heads stops at the first node that records an epoch:
// every later node records that epoch too, or has a larger czxid.
func (s *Store) heads(key string, run []node, skip string, now int64, drop bool) (driver.Info, string, error) {
	info, src, seen := driver.Info{Key: key}, "", false
	for _, n := range run {
		if n.path == skip {
			continue
		}
		e, err := s.read(key, n.path, true)
		if errors.Is(err, lease.ErrNotHeld) {
			continue
		} else if err != nil {
			return info, "", err
		}
		seen = true
		left := e.mtime + e.ttlMs - now // both times stamped by the ZooKeeper leader
		if left <= 0 && drop {
			err = s.dropped(n.path, e.version, nil)
		}
		if err != nil {
			return info, "", err
		} else if left <= 0 {
			continue
		}
		if !info.Held || e.fence() < info.Fence {
			info.Holder, info.Fence, src = e.holder, e.fence(), n.path
		}
		info.Held, info.Shared = true, n.shared
		info.Remaining = max(info.Remaining, time.Duration(min(left, e.ttlMs))*time.Millisecond)
		if n.shared {
			info.Readers++
		}
		if skip != "" && e.epoch != 0 { // a joiner needs no more: the epoch is recorded
			break
		}
	}
	if !seen {
		return info, "", errAgain
	}
	return info, src, nil
}

// Inspect implements driver.Store: the lowest live node of key, and the
// readers behind it if it is a reader's, unless their TTLs ran out. A write to the key's parent comes first: it tells the
// server's time, and the reads after it see every write completed before
// Inspect. A node gone since the listing was released: the next one holds.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if _, err := s.usable(ctx); err != nil {
		return driver.Info{}, err
	}
	parent := s.parent(key)
	var nodes []node
	pst, err := s.conn.Set(parent, nil, -1)
	if err == nil {
		nodes, _, err = s.nodes(parent, "")
	}
	for h := lead(nodes); h > 0; h = lead(nodes) { // none if err
		if info, _, err := s.heads(key, nodes[:h], "", pst.Mtime, false); err != errAgain {
			return info, wrapped(err, "inspect", key)
		}
		nodes = nodes[h:]
	}
	if errors.Is(err, zk.ErrNoNode) {
		err = nil
	}
	return driver.Info{Key: key}, wrapped(err, "inspect", key)
}

// dropped deletes node p at version (-1: any) and returns err, or the
// deletion's error: a node already gone, or written since, is no error.
func (s *Store) dropped(p string, version int32, err error) error {
	if derr := s.conn.Delete(p, version); derr != nil && !errors.Is(derr, zk.ErrNoNode) && !errors.Is(derr, zk.ErrBadVersion) {
		return fmt.Errorf("delete %s: %w", redactPath(p), derr)
	}
	return err
}
