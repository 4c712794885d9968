// Hand-off on release: a Release that knows the waiter first in the key's
// queue (from a subscription's mirror of the queues) gives it the key in its
// own transaction, and that waiter's store grants it from the watch event,
// with no write on the acquisition's path (as etcd's Mutex hands over with a
// read, this hands over with none).

package etcdlease

import (
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
)

// A lease key's value is token NUL holder when the key was created by its
// holder's Acquire: the fence is then the key's create revision. A key
// handed over by a Release keeps its create revision, so its value carries
// the fence: token NUL NUL fence NUL holder. Both forms start with the token
// and a NUL, which is what ours compares.

// encodeFenced returns the value of a key handed to token with fence.
func encodeFenced(token, holder string, fence int64) string {
	return token + "\x00\x00" + strconv.FormatInt(fence, 10) + "\x00" + holder
}

// decodeValue splits a stored value into token, holder and the fence it
// carries (0 when the key was created by its holder).
func decodeValue(v []byte) (token, holder string, fence int64) {
	token, rest, _ := strings.Cut(string(v), "\x00")
	if f, ok := strings.CutPrefix(rest, "\x00"); ok {
		if num, h, ok := strings.Cut(f, "\x00"); ok {
			if n, err := strconv.ParseInt(num, 10, 64); err == nil && n > 0 {
				return token, h, n
			}
		}
	}
	return token, rest, 0
}

// fenceOf returns the fence of the holder of kv: the one its value carries,
// else its create revision. Fences grow strictly from holder to holder: a
// hand-off gives the previous fence plus one, which is at most the revision
// of the hand-off (every fence is at most the revision that granted it), so
// a key created later gets a larger create revision.
func fenceOf(kv *mvccpb.KeyValue) int64 {
	if _, _, f := decodeValue(kv.Value); f > 0 {
		return f
	}
	return kv.CreateRevision
}

// entry is what a subscription's mirror knows of a queue entry.
type entry struct {
	rev    int64            // create revision: the place in the queue
	lease  clientv3.LeaseID // the entry's etcd lease
	holder string           // the waiter's holder (the entry's value)
	valued bool             // holder is known (the entry came from the watch, not the first read)
}

// handed is a hand-off seen by a subscription: at revision rev, a Release
// put the lease key for token with fence, on the etcd lease of token's
// queue entry (and deleted the entry).
type handed struct {
	token   string
	fence   int64
	lease   clientv3.LeaseID
	created int64 // the key's create revision
	rev     int64
}

// successorLocked returns the waiter first in key's queue, other than
// token, as the store's subscriptions last saw it, and whether there is one
// whose holder is known (an entry listed by a subscription's first read,
// which reads keys only, is not handed the key: its holder would be
// missing). The hand-off's transaction checks that it is still first.
func (s *Store) successorLocked(key, token string) (string, entry, bool) {
	var best string
	var be entry
	for sub := range s.subs {
		for t, e := range sub.queues[key] {
			if t != token && (best == "" || e.rev < be.rev) {
				best, be = t, e
			}
		}
	}
	return best, be, best != "" && be.valued
}

// handOff returns, for a Release of r whose token holds the key with the
// fence the store recorded (or saw handed to it), the transaction's condition and operations that
// give the key to the first waiter instead of deleting it: the key now
// carries that waiter's token and the fence plus one, on the etcd lease of
// the waiter's entry, which is deleted. ok is false when the store knows no
// fence for r or no waiter.
func (s *Store) handOff(r lease.Request) (cmps []clientv3.Cmp, ops []clientv3.Op, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fence int64
	if h, ok := s.held[r.Key]; ok && h.token == r.Token {
		fence = h.fence
	} else if h, ok := s.handed[r.Key]; ok && h.token == r.Token {
		fence = h.fence // handed to a waiter that gives up before taking it
	}
	if fence == 0 {
		return nil, nil, false
	}
	token, e, ok := s.successorLocked(r.Key, r.Token)
	if !ok {
		return nil, nil, false
	}
	k, ek := s.keyPath(r.Key), s.entryKey(r.Key, token)
	cmps = append(ours(k, r.Token), s.noneAhead(r.Key, token, e.rev)...)
	cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(ek), "=", int64(e.lease)))
	ops = []clientv3.Op{
		clientv3.OpPut(k, encodeFenced(token, e.holder, fence+1), clientv3.WithLease(e.lease)),
		clientv3.OpDelete(ek),
	}
	return cmps, ops, true
}

// takeHanded grants r from a hand-off the store's subscription saw, without
// a round trip, when the hand-off was to r.Token on the etcd lease of the
// queue entry this store wrote for it, refreshed less than half a TTL ago
// (the grant's Since counts from that refresh: the key lives on that etcd
// lease until the first renewal moves it to the store's own).
func (s *Store) takeHanded(r lease.Request) (lease.Grant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.handed[r.Key]
	if !ok || h.token != r.Token || s.closed {
		return lease.Grant{}, false
	}
	ek := s.entryKey(r.Key, r.Token)
	q, ok := s.queued[ek]
	if !ok || q.id != h.lease {
		return lease.Grant{}, false
	}
	since := time.Since(q.sent)
	if since < 0 || since >= r.TTL/2 {
		return lease.Grant{}, false
	}
	delete(s.handed, r.Key)
	delete(s.queued, ek)
	s.carried[ek] = spare{id: q.id, secs: q.secs, sent: q.sent}
	s.recordLocked(r.Key, r.Token, h.created, h.lease, h.rev, h.fence)
	return lease.Grant{Fence: uint64(h.fence), Since: since}, true
}

// settle is the end of a Release of the token whose queue entry is ek.
// If its transaction ran (ran), the entry is deleted, so its etcd lease
// carries nothing and becomes a spare; an entry lease that carried the key
// handed to the token becomes a spare if the key left it (released).
// Otherwise they are forgotten: the transaction's outcome is unknown, or
// the key is not ours (it expired with that lease).
func (s *Store) settle(ek string, ran, released bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, queued := s.queued[ek]
	delete(s.queued, ek)
	c, carried := s.carried[ek]
	delete(s.carried, ek)
	if ran && released && carried {
		s.addSpareLocked(c)
	}
	if ran && queued {
		s.addSpareLocked(spare{id: q.id, secs: q.secs, sent: q.sent})
	}
}

// reattached is called when the key of the token whose queue entry is ek
// moved from etcd lease from to the store's: an entry lease that carried
// it becomes a spare.
func (s *Store) reattached(ek string, from clientv3.LeaseID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.carried[ek]; ok && c.id == from {
		delete(s.carried, ek)
		s.addSpareLocked(c)
	}
}
