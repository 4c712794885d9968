// The FIFO queue of waiters (lease.Queuer): a queued waiter keeps its node.
//
// A key's nodes, in sequence order, are its queue: the lowest live node holds
// the key, unless its data marks it "waiting" (a queue entry whose turn has
// come but that has not acquired yet: the key is free, reserved for it), and
// every other node is a waiter's entry. Acquire with Request.Queue keeps the
// node it created when it cannot grant the key (instead of deleting it), and
// marks it waiting; each later Acquire of the token refreshes the entry with
// a version-checked write (mtime + TTL is its expiry, judged by ZooKeeper's
// clock, as for holders) and grants the key once the node is the lowest, by
// a write that clears the mark. With Request.RecordLater (the Client's
// queued attempts) entries carry no mark (the first one reads as the holder
// once it is the lowest) and one written less than half its TTL ago is
// granted without a write on the hand-off's path (Grant.Since: the TTL runs
// from the entry's last write). An entry whose owner stopped refreshing it is
// deleted (version-checked) by the next acquirer that finds it lowest; one
// whose session ended is deleted by ZooKeeper. Release deletes the node,
// holder or entry; the waiter behind it, which watches only its predecessor,
// is woken.

package zklease

import "github.com/leasekit/lease"

var _ lease.Queuer = (*Store)(nil)

// QueuesWaiters implements lease.Queuer: a Store hands a freed key to the
// waiter queued longest (see the package documentation).
func (s *Store) QueuesWaiters() bool { return true }

// handoff is a queued entry of ours (token, node path) that becomes the
// lowest node when its only predecessor is deleted.
type handoff struct{ token, entry string }

// expectHandoff records that r's entry, second in its queue, is the lowest
// once the watched node pred is deleted (sequential nodes are never created
// below an existing one, so nothing can come between). If the callback has
// already seen that deletion, the entry is handed at once.
func (s *Store) expectHandoff(token, entry, pred string) {
	if !s.tracked {
		return // no event callback: the entry's next Acquire lists the nodes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deletedLocked(pred) {
		s.handed[token] = entry
		return
	}
	s.handoffs[pred] = handoff{token, entry}
}

// deletedLocked reports whether the event callback saw the watched node
// path deleted lately (paths of sequential nodes are never reused); s.mu is
// held.
func (s *Store) deletedLocked(path string) bool {
	for _, p := range s.deleted {
		if p == path {
			return true
		}
	}
	return false
}

// nodeDeleted notes the deletion of a watched node, seen by the event
// callback: a queued entry of ours that it preceded is now the lowest.
func (s *Store) nodeDeleted(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted[s.ndeleted%len(s.deleted)] = path
	s.ndeleted++
	h, ok := s.handoffs[path]
	if !ok {
		return
	}
	delete(s.handoffs, path)
	if g := s.grants[h.token]; g != nil && g.waiting && g.path == h.entry {
		s.handed[h.token] = h.entry
	}
}

// takeHanded reports whether r's entry at path was handed the key (and
// forgets the mark).
func (s *Store) takeHanded(token, path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.handed[token]
	delete(s.handed, token)
	return ok && e == path
}
