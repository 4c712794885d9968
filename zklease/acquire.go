// Acquire and Inspect: create a node, then the lowest live node of the
// key's parent holds the key (unless it is a queued waiter's entry: the key
// is then free but reserved for that waiter).

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

// Acquire implements lease.Store. It creates our node (ephemeral,
// sequential, named after the token) in one round trip that also tells the
// fence and the server's time, lists the key's nodes, and grants the key if
// ours is the lowest. Otherwise it looks at the lowest node: if its owner
// stopped refreshing it for its TTL it deletes it (version-checked) and looks
// again; if it is live the key is held (or, if it is a queued waiter's,
// reserved for the queue) and Acquire returns a *lease.HeldError. Without
// r.Queue it deletes our node first; with r.Queue the node stays as r.Token's
// entry in the key's FIFO queue (see queue.go) and a later Acquire of the
// token refreshes it and grants the key once it is the lowest.
//
// A key free of nodes costs two round trips; a held key four, plus one for
// the watch while a subscription is open (two for a queued waiter two or
// more places back, see the package documentation). A queued token's later
// attempt costs two when it is granted (list, write; none when the event
// callback saw its only predecessor go) and four (plus the watches) while it
// waits (list, refresh, read the lowest node), or two for a Client's entry
// written less than TTL/16 ago (list, watch).
func (s *Store) Acquire(ctx context.Context, r lease.Request) (lease.Grant, error) {
	if err := s.check(ctx, r, true); err != nil {
		return lease.Grant{}, err
	}
	if err := lease.CheckHolder(r.Holder); err != nil {
		return lease.Grant{}, err
	}
	called := time.Now()
	lost := s.lostChan()
	parent := s.parent(r.Key)
	// The same token again through this store: refresh the node it granted,
	// or look again from the place of its queue entry.
	if g, ok := s.remembered(r); ok {
		var gr lease.Grant
		var err error
		switch {
		case g.waiting && s.takeHanded(r.Token, g.path):
			// Its only predecessor is gone (the event callback saw it):
			// the entry is the lowest, and the key ours with no listing.
			gr, err = s.grantLowest(r, g, 0, called)
		case g.waiting:
			gr, err = s.settle(ctx, r, parent, g, false, 0, 0, called)
		default:
			var st *zk.Stat
			if st, err = s.refresh(r, g); err == nil {
				gr = lease.Grant{Fence: uint64(st.Czxid)}
			}
		}
		var held *lease.HeldError
		switch {
		case err == nil:
			gr.Lost = lost
			return gr, nil
		case errors.As(err, &held):
			return lease.Grant{}, err
		case !errors.Is(err, lease.ErrNotHeld):
			return lease.Grant{}, fmt.Errorf("zklease: acquire %q: %w", r.Key, err)
		}
		// Expired or gone (the lease, or the queue entry): acquire anew,
		// at the back of the queue.
		s.forget(r.Token)
	}
	created := time.Now()
	ours, pst, err := s.create(parent, r)
	if err != nil {
		return lease.Grant{}, fmt.Errorf("zklease: acquire %q: %w", r.Key, err)
	}
	// The create and a write to the parent ran in one transaction: the
	// parent's pzxid is our node's czxid and its mtime our node's ctime.
	mine := grant{key: r.Key, path: ours, version: 0, mtime: pst.Mtime, ttlMs: r.TTL.Milliseconds(), czxid: pst.Pzxid, wrote: created}
	g, err := s.settle(ctx, r, parent, mine, true, pst.Pzxid, pst.Mtime, called)
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
	create := &zk.CreateRequest{Path: parent + "/" + nodePrefix(r.Token), Data: encodeData(r, false), Acl: s.acl, Flags: zk.FlagEphemeralSequential}
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

// settle decides an acquisition once our node mine exists. fresh: we have
// just created it (not yet a queue entry), fence is its czxid and now its
// creation time (server ms). Otherwise mine is r.Token's queue entry, which
// settle refreshes (the write tells the server's time) unless it grants the
// key at once.
func (s *Store) settle(ctx context.Context, r lease.Request, parent string, mine grant, fresh bool, fence, now int64, called time.Time) (lease.Grant, error) {
	ours := mine.path
	oursName := ours[len(parent)+1:]
	refreshed := fresh // the creation counts as the entry's first write
	for range maxRounds {
		handoffPred := "" // set when we wait right behind the lowest node
		if err := ctx.Err(); err != nil {
			return lease.Grant{}, err
		}
		children, _, err := s.conn.Children(parent)
		if errors.Is(err, zk.ErrNoNode) && !fresh {
			return lease.Grant{}, fmt.Errorf("our queue entry %s is gone: %w", redactPath(ours), lease.ErrNotHeld)
		}
		if err != nil {
			return lease.Grant{}, fmt.Errorf("list %s: %w", parent, err)
		}
		nodes := sortNodes(children)
		ahead, older := -1, -1
		for i := range nodes {
			switch {
			case nodes[i].name == oursName:
				ahead = i
			case nodes[i].token == r.Token && older < 0:
				older = i
			}
		}
		if ahead < 0 {
			if !fresh {
				// Dropped after its TTL by another acquirer, or deleted with
				// our session: the token left the queue.
				return lease.Grant{}, fmt.Errorf("our queue entry %s is gone: %w", redactPath(ours), lease.ErrNotHeld)
			}
			return lease.Grant{}, fmt.Errorf("our holder node %s vanished (session expired?)", redactPath(ours))
		}
		if older >= 0 {
			// The token has another node: an acquire of the same token
			// through another store (or session), or a create cut off by a
			// connection loss.
			if older == 0 {
				if err := s.conn.Delete(ours, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					return lease.Grant{}, fmt.Errorf("delete %s: %w", redactPath(ours), err)
				}
				s.forget(r.Token)
				return s.reacquire(r, parent+"/"+nodes[older].name)
			}
			// A stale node of ours that never held: remove it.
			if err := s.conn.Delete(parent+"/"+nodes[older].name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return lease.Grant{}, fmt.Errorf("delete %s: %w", redactPath(nodes[older].name), err)
			}
			continue
		}
		if ahead == 0 {
			return s.grantLowest(r, mine, fence, called)
		}
		if fresh && r.Queue && ahead-1 >= s.maxWaiters {
			// A new waiter behind the holder and a full queue: leave.
			if err := s.conn.Delete(ours, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return lease.Grant{}, fmt.Errorf("delete %s beyond the cap of %d waiters: %w", redactPath(ours), s.maxWaiters, err)
			}
			return lease.Grant{}, &lease.QueueFullError{Key: r.Key, Max: s.maxWaiters}
		}
		// A Client's entry written less than a sixteenth of its TTL ago is
		// neither refreshed nor made to read the lowest node on a later
		// attempt (one woken to look again, see the package documentation):
		// the Client attempts again within a renew interval, shorter than
		// the TTL minus its drift margin (TTL/10 by default), so the entry is
		// refreshed before it is TTL old. (Only with a margin under TTL/16
		// and a renew interval that close to the TTL could the entry expire
		// first: the waiter would queue again at the back; the key's safety
		// does not depend on it.) Without the write the server's time is
		// unknown, so the lowest node is not judged: the attempts that
		// refresh do it.
		young := !fresh && r.Queue && r.RecordLater && !mine.wrote.IsZero() &&
			time.Since(mine.wrote) < time.Duration(mine.ttlMs)*time.Millisecond/16
		if !refreshed && !young {
			// Refresh our entry (another TTL, same place); the write's mtime
			// is the server's time.
			st, err := s.refresh(r, mine)
			if err != nil {
				return lease.Grant{}, err
			}
			mine.version, mine.mtime, mine.ttlMs = st.Version, st.Mtime, r.TTL.Milliseconds()
			now, refreshed = st.Mtime, true
		}
		low := nodes[0]
		lowPath := parent + "/" + low.name
		// The lowest node is read to drop it once its TTL ran out and to
		// name the holder in the HeldError. A new entry of the Client's with
		// another waiter between it and the lowest skips that read: the
		// waiter right behind the lowest looks at it, and so does this
		// entry's next attempt, at the latest a renew interval later; so
		// does a young entry's later attempt (above).
		peek := !r.Queue || !r.RecordLater || (fresh && ahead < 2) || (!fresh && !young)
		var d nodeData
		st := &zk.Stat{}
		if peek {
			data, lst, err := s.conn.Get(lowPath)
			if errors.Is(err, zk.ErrNoNode) {
				continue // released meanwhile: look again
			}
			if err != nil {
				return lease.Grant{}, fmt.Errorf("read %s: %w", redactPath(lowPath), err)
			}
			d, st = decodeData(data), lst
			if d.expiresAt(st.Mtime) <= now {
				// Its owner has not refreshed it for its TTL (its session may
				// live on): take it away, unless it was refreshed since we
				// read it.
				err := s.conn.Delete(lowPath, st.Version)
				if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
					return lease.Grant{}, fmt.Errorf("delete expired %s: %w", redactPath(lowPath), err)
				}
				continue
			}
		}
		if s.watching() {
			// Wake subscribers when the node goes: a queued waiter watches
			// its predecessor (a release wakes the next waiter, not the
			// whole queue; and, below, the node before it); a plain try
			// watches the lowest node.
			watched := lowPath
			if r.Queue || !fresh {
				watched = parent + "/" + nodes[ahead-1].name
			}
			next := "" // a plain try: wake every waiter of the key
			if r.Queue {
				next = r.Token // only this waiter may be first now
			}
			gone, err := s.watch(watchEntry{key: r.Key, path: watched, token: next})
			if err != nil {
				return lease.Grant{}, err
			}
			if gone {
				continue
			}
			if r.Queue && ahead == 1 {
				handoffPred = watched // the lowest: its deletion makes us the lowest
			}
			if r.Queue && ahead >= 2 && s.tracked {
				// Also watch the node before our predecessor: when it goes,
				// our predecessor may be the lowest, and the attempt this
				// wakes lists the nodes and, if so, expects the hand-off
				// (above), while the predecessor still holds. The release
				// that follows then grants us the key on its event alone,
				// with no listing on the hand-off's path.
				gone, err := s.watch(watchEntry{key: r.Key, path: parent + "/" + nodes[ahead-2].name, token: r.Token, moved: true})
				if err != nil {
					return lease.Grant{}, err
				}
				if gone {
					continue
				}
			}
		}
		held := &lease.HeldError{Key: r.Key, Queued: ahead}
		if !d.Waiting {
			// The lowest node holds the key (taken to be so when not read);
			// the nodes between it and ours are queued waiters.
			if peek {
				held.Holder, held.Fence, held.Remaining = d.Holder, uint64(st.Czxid), remaining(d, st.Mtime, now)
			}
			held.Queued--
		}
		switch {
		case fresh && r.Queue && r.RecordLater:
			// Keep our node as the token's queue entry, as created: the
			// Client's entries carry no waiting mark (see grantLowest).
			mine.waiting = true
			s.remember(r, mine)
		case fresh && r.Queue:
			// Keep our node as the token's queue entry, marked waiting.
			mine.waiting = true
			if _, err := s.refresh(r, mine); err != nil {
				return lease.Grant{}, fmt.Errorf("queue %s: %w", redactPath(ours), err)
			}
		case fresh:
			if err := s.conn.Delete(ours, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				// Not a HeldError: the Client then releases our token, so
				// the node cannot hold the key for nobody later.
				return lease.Grant{}, fmt.Errorf("delete %s: %w", redactPath(ours), err)
			}
		}
		if handoffPred != "" {
			s.expectHandoff(r.Token, ours, handoffPred) // after remember: the entry is known
		}
		return lease.Grant{}, held
	}
	return lease.Grant{}, fmt.Errorf("the nodes of %s kept changing for %d rounds", parent, maxRounds)
}

// grantLowest grants the key to r once our node mine is the lowest: a node
// just created holds it already (its fence is fence). A queue entry becomes
// the holder by a version-checked write that clears its waiting mark and
// starts the lease's TTL, except with r.RecordLater (the Client's queued
// attempts) for an entry written less than half its TTL ago: it holds the
// key as it is, without a write on the hand-off's path. Its TTL runs from
// that write (the others judge it expired mtime + TTL after, and we sent it
// before its mtime), which Grant.Since tells the Client; the Client's
// entries carry no waiting mark, so nothing is left to record (were it
// marked, Grant.Unrecorded asks the Client to renew at once, which clears
// the mark). called is when Acquire began.
func (s *Store) grantLowest(r lease.Request, mine grant, fence int64, called time.Time) (lease.Grant, error) {
	if !mine.waiting {
		mine.czxid = fence
		s.remember(r, mine)
		return lease.Grant{Fence: uint64(fence)}, nil
	}
	mine.waiting = false
	ttl := min(r.TTL, time.Duration(mine.ttlMs)*time.Millisecond)
	if since := called.Sub(mine.wrote); r.RecordLater && mine.czxid > 0 && !mine.wrote.IsZero() && since > 0 && time.Since(mine.wrote) < ttl/2 {
		s.remember(r, mine)
		return lease.Grant{Fence: uint64(mine.czxid), Since: since, Unrecorded: mine.marked}, nil
	}
	st, err := s.refresh(r, mine)
	if err != nil {
		return lease.Grant{}, err
	}
	return lease.Grant{Fence: uint64(st.Czxid)}, nil
}

// reacquire refreshes the node path that r's token already holds.
func (s *Store) reacquire(r lease.Request, path string) (lease.Grant, error) {
	data, st, err := s.conn.Get(path)
	if errors.Is(err, zk.ErrNoNode) {
		return lease.Grant{}, fmt.Errorf("the token's holder node %s vanished", redactPath(path))
	}
	if err != nil {
		return lease.Grant{}, fmt.Errorf("read %s: %w", redactPath(path), err)
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

// Inspect implements lease.Store: the lowest node of key, unless its TTL ran
// out or it is a queued waiter's entry (the key is then free, reserved for
// the queue). It costs three round trips, one of them a write to the key's
// parent node, which is how the Store learns the server's time; the write
// comes first, so that the reads see every write completed before Inspect.
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
		// The write first: once it has completed, this session's server
		// has applied every write before it, so the reads after it see
		// what other sessions wrote before this call (ZooKeeper reads
		// from a lagging follower otherwise).
		pst, err := s.conn.Set(parent, nil, -1)
		if errors.Is(err, zk.ErrNoNode) {
			return free, nil
		}
		if err != nil {
			return lease.Info{}, fmt.Errorf("zklease: inspect %q: %w", key, err)
		}
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
		if decodeData(data).Waiting {
			// A queued waiter's entry: the key is free, reserved for it.
			return free, nil
		}
		d := decodeData(data)
		if d.expiresAt(st.Mtime) <= pst.Mtime {
			return lease.Info{Key: key, Fence: uint64(st.Czxid)}, nil
		}
		return lease.Info{Key: key, Held: true, Holder: d.Holder, Fence: uint64(st.Czxid), Remaining: remaining(d, st.Mtime, pst.Mtime)}, nil
	}
	return lease.Info{}, fmt.Errorf("zklease: inspect %q: the holder nodes kept changing", key)
}
