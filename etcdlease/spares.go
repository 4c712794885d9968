// Spare entry leases: the etcd lease of a queue entry that left its queue
// (its waiter acquired or gave up) and of a handed key that left it (released,
// handed on, or moved to the store's lease) carries nothing any more; the
// store keeps it, while it lives, for the next entry it queues with that TTL,
// instead of granting a new one (a Raft proposal) and letting the old one
// expire (another).

package etcdlease

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// spare is an etcd lease that carries no key.
type spare struct {
	id   clientv3.LeaseID
	secs int64     // its TTL in seconds, as granted
	sent time.Time // send time of its last grant or keep-alive
}

// maxSpares bounds the spare leases kept per TTL; others expire.
const maxSpares = 16

// addSpareLocked keeps sp for reuse unless it has expired or the pool is
// full. s.mu is held.
func (s *Store) addSpareLocked(sp spare) {
	if sp.id == 0 || s.closed || time.Since(sp.sent) >= time.Duration(sp.secs)*time.Second {
		return
	}
	pool := s.spares[sp.secs]
	for _, o := range pool {
		if o.id == sp.id {
			return
		}
	}
	if len(pool) >= maxSpares {
		return
	}
	s.spares[sp.secs] = append(pool, sp)
}

// addSpare is addSpareLocked without s.mu.
func (s *Store) addSpare(sp spare) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addSpareLocked(sp)
}

// takeSpare removes and returns the most recently refreshed spare lease of
// secs seconds, dropping those that must have expired; ok is false if none.
func (s *Store) takeSpare(secs int64) (spare, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pool := s.spares[secs]
	best := -1
	n := 0
	for _, sp := range pool {
		if time.Since(sp.sent) >= time.Duration(secs)*time.Second {
			continue // expired
		}
		pool[n] = sp
		if best < 0 || sp.sent.After(pool[best].sent) {
			best = n
		}
		n++
	}
	pool = pool[:n]
	if best < 0 {
		delete(s.spares, secs)
		return spare{}, false
	}
	sp := pool[best]
	pool = append(pool[:best], pool[best+1:]...)
	s.spares[secs] = pool
	return sp, true
}

// freshSpare returns a fresh spare lease of secs seconds (see fresh),
// usable without a keep-alive, if there is one; it is removed from the pool
// (addSpare returns it).
func (s *Store) freshSpare(secs int64) (spare, bool) {
	sp, ok := s.takeSpare(secs)
	if ok && !fresh(sp.sent, secs) {
		s.addSpare(sp)
		return spare{}, false
	}
	return sp, ok
}

// spareIDs returns and forgets every spare lease, for Close to revoke.
func (s *Store) spareIDsLocked() []clientv3.LeaseID {
	var ids []clientv3.LeaseID
	for _, pool := range s.spares {
		for _, sp := range pool {
			ids = append(ids, sp.id)
		}
	}
	clear(s.spares)
	return ids
}
