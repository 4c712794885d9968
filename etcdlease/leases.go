// The store's etcd leases: one per distinct TTL, granted lazily, refreshed
// before an acquisition and by renewals, dropped (closing their Lost
// channel) when etcd no longer has them.

package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
)

// etcdLease is one etcd lease of the store and the keys' loss signal.
type etcdLease struct {
	id  clientv3.LeaseID
	ttl int64 // seconds, as granted

	// Guarded by Store.mu.
	refreshed time.Time     // send time of the last successful grant or keep-alive
	lost      chan struct{} // closed when etcd no longer has the lease
	dead      bool
}

// current returns the live etcd lease for ttl seconds, or nil.
func (s *Store) current(ttl int64) *etcdLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[ttl]
}

// drop forgets l and closes its Lost channel: every key on it is gone,
// including the orphans and the keys recorded on it.
func (s *Store) drop(l *etcdLease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.dead {
		return
	}
	l.dead = true
	close(l.lost)
	if s.leases[l.ttl] == l {
		delete(s.leases, l.ttl)
	}
	s.dropOrphansLocked(l)
	s.dropHeldLocked(l.id)
}

// markRefreshed records a successful keep-alive of l sent at sent.
func (s *Store) markRefreshed(l *etcdLease, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sent.After(l.refreshed) {
		l.refreshed = sent
	}
}

// keepAlive refreshes l once, and returns the revision of the member that
// answered. It returns an error matching lease.ErrNotHeld, after dropping l,
// when etcd no longer has it.
func (s *Store) keepAlive(ctx context.Context, l *etcdLease) (int64, error) {
	sent := time.Now()
	resp, err := s.cli.KeepAliveOnce(ctx, l.id)
	switch {
	case err == nil:
		s.markRefreshed(l, sent)
		var rev int64
		if resp.ResponseHeader != nil {
			rev = resp.ResponseHeader.Revision
		}
		return rev, nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.drop(l)
		return 0, fmt.Errorf("etcd lease %x expired or was revoked: %w", int64(l.id), lease.ErrNotHeld)
	default:
		return 0, fmt.Errorf("keep-alive of etcd lease %x: %w", int64(l.id), err)
	}
}

// leaseFor returns the store's etcd lease for ttl (rounded up to seconds),
// refreshed by etcd no earlier than start, and when its last refresh was
// sent: a key attached to it now lives at least ttl from then. It refreshes
// the current lease, or grants a new one if there is none or etcd lost it.
// Concurrent calls for one TTL share a refresh that started after them.
func (s *Store) leaseFor(ctx context.Context, ttl time.Duration, start time.Time) (*etcdLease, time.Time, error) {
	secs := ttlSeconds(ttl)
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, time.Time{}, ErrClosed
		}
		l := s.leases[secs]
		if l != nil && !l.refreshed.Before(start) {
			refreshed := l.refreshed
			s.mu.Unlock()
			return l, refreshed, nil
		}
		if wait := s.busy[secs]; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, time.Time{}, ctx.Err()
			}
		}
		done := make(chan struct{})
		s.busy[secs] = done
		s.mu.Unlock()

		l, err := s.refreshOrGrant(ctx, l, secs)

		s.mu.Lock()
		delete(s.busy, secs)
		close(done)
		var refreshed time.Time
		if l != nil {
			refreshed = l.refreshed
		}
		s.mu.Unlock()
		return l, refreshed, err
	}
}

// refreshOrGrant keeps l alive, or grants a new lease of secs seconds when l
// is nil or gone.
func (s *Store) refreshOrGrant(ctx context.Context, l *etcdLease, secs int64) (*etcdLease, error) {
	if l != nil {
		_, err := s.keepAlive(ctx, l)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, lease.ErrNotHeld) {
			return nil, err
		}
	}
	sent := time.Now()
	resp, err := s.cli.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("granting an etcd lease of %ds: %w", secs, err)
	}
	if resp.TTL != secs {
		// etcd raised the TTL to its minimum (1.5 election timeouts).
		_, _ = s.cli.Revoke(ctx, resp.ID)
		return nil, lease.Invalid("ttl", "etcd granted a %ds lease for a %ds TTL: the server's minimum lease TTL is %ds (1.5 election timeouts)", resp.TTL, secs, resp.TTL)
	}
	nl := &etcdLease{id: resp.ID, ttl: secs, refreshed: sent, lost: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		// Close has already revoked the leases it saw: revoke this one too.
		s.mu.Unlock()
		_, _ = s.cli.Revoke(ctx, resp.ID)
		return nil, ErrClosed
	}
	s.leases[secs] = nl
	s.mu.Unlock()
	return nl, nil
}
