// Release announcements: one etcd watch on the store's prefix; deletions of
// lease keys (releases and expiries) and of queue entries (a waiter gave up,
// expired or acquired) announce the lease key, naming the waiter now first in
// its queue (lease.Announcer) from a mirror of the queues the watch keeps.

package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
)

// errSubClosed is returned by Next after Close.
var errSubClosed = errors.New("etcdlease: subscription closed")

// Subscribe opens one watch on every key under the store's prefix, and
// returns once etcd confirmed that the watch is active. Next announces a key
// when it is deleted (a release, or the expiry of its etcd lease) and when
// an entry of its queue of waiters is deleted (a waiter gave up or its entry
// expired: the next waiter may now be first), except when the same
// transaction put the key (the entry's waiter acquired it: the others have
// nothing new to try; or a Release handed it to that waiter, which is
// announced with that waiter as Next and noted for the store's Acquire). Each announcement names the waiter first in the
// key's queue, from a mirror of the namespace's queues: Subscribe reads the
// queue entries once (keys only) and the watch, which starts right after that
// read, keeps the mirror current. The watch requires
// a leader: on a member that loses the quorum it ends, and Next returns an
// error. Each subscription has its own watch stream; Close ends it.
func (s *Store) Subscribe(ctx context.Context) (lease.Subscription, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	queues, rev, err := s.readQueues(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcdlease: subscribe: %w", err)
	}
	w := clientv3.NewWatcher(s.cli)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	// Until the watch is created, ctx bounds it (Watch itself may block while
	// the client connects).
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	ch := w.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify(), clientv3.WithRev(rev+1))
	sub := &subscription{s: s, w: w, cancel: cancel, ch: ch, done: make(chan struct{}), queues: queues}
	fail := func(err error) (lease.Subscription, error) {
		_ = sub.Close()
		return nil, fmt.Errorf("etcdlease: subscribe: %w", err)
	}
	if _, err := awaitCreated(ctx, ch); err != nil {
		return fail(err)
	}
	if !stop() {
		return fail(ctx.Err())
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fail(ErrClosed)
	}
	s.subs[sub] = true
	s.mu.Unlock()
	return sub, nil
}

// awaitCreated waits until etcd confirms the watch ch (made with
// WithCreatedNotify) and returns the revision of its creation notice.
func awaitCreated(ctx context.Context, ch clientv3.WatchChan) (int64, error) {
	select {
	case resp, ok := <-ch:
		switch {
		case !ok:
			return 0, errors.New("the watch closed before it was created")
		case resp.Err() != nil:
			return 0, resp.Err()
		case !resp.Created:
			return 0, errors.New("the first watch response is not the creation notice")
		}
		return resp.Header.Revision, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// subscription is one watch on the store's prefix.
type subscription struct {
	s      *Store
	w      clientv3.Watcher
	cancel context.CancelFunc
	ch     clientv3.WatchChan
	done   chan struct{}
	once   sync.Once

	pending []lease.Announcement // announcements not yet returned; used by Next only
	queues  queues               // the namespace's queues of waiters, as of the last event; s.mu guards it
}

var _ lease.Announcer = (*subscription)(nil)

// Next returns the next released key (without the prefix), or an error when
// ctx ends, the subscription is closed or the watch broke (announcements may
// then have been missed).
func (sub *subscription) Next(ctx context.Context) (string, error) {
	a, err := sub.NextAnnouncement(ctx)
	return a.Key, err
}

// NextAnnouncement is Next with the token of the waiter first in the key's
// queue after the event (see [lease.Announcer]).
func (sub *subscription) NextAnnouncement(ctx context.Context) (lease.Announcement, error) {
	for len(sub.pending) == 0 {
		select {
		case resp, ok := <-sub.ch:
			if !ok {
				select {
				case <-sub.done:
					return lease.Announcement{}, errSubClosed
				default:
					return lease.Announcement{}, errors.New("etcdlease: the watch ended")
				}
			}
			if err := resp.Err(); err != nil {
				return lease.Announcement{}, fmt.Errorf("etcdlease: watch: %w", err)
			}
			if resp.Canceled {
				return lease.Announcement{}, errors.New("etcdlease: the watch was cancelled")
			}
			sub.pending = sub.apply(resp.Events)
		case <-ctx.Done():
			return lease.Announcement{}, ctx.Err()
		case <-sub.done:
			return lease.Announcement{}, errSubClosed
		}
	}
	a := sub.pending[0]
	sub.pending = sub.pending[1:]
	return a, nil
}

// queues mirrors the queues of waiters of a namespace: lease key → token →
// the token's entry.
type queues map[string]map[string]entry

// readQueues reads every key under the store's prefix (keys only: the
// entries' holders are not known until the watch delivers them) and returns
// the queue entries with the revision of the read.
func (s *Store) readQueues(ctx context.Context) (queues, int64, error) {
	resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, 0, err
	}
	q := make(queues)
	for _, kv := range resp.Kvs {
		if key, token, entry, ok := s.parseKey(kv.Key); ok && entry {
			q.put(key, token, kv, false)
		}
	}
	return q, resp.Header.Revision, nil
}

// put records token's entry in key's queue, kv; valued says kv carries its
// value (the waiter's holder).
func (q queues) put(key, token string, kv *mvccpb.KeyValue, valued bool) {
	m := q[key]
	if m == nil {
		m = make(map[string]entry)
		q[key] = m
	}
	m[token] = entry{rev: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease), holder: string(kv.Value), valued: valued}
}

// del forgets token's entry in key's queue.
func (q queues) del(key, token string) {
	if m := q[key]; m != nil {
		delete(m, token)
		if len(m) == 0 {
			delete(q, key)
		}
	}
}

// head returns the token of key's oldest entry ("" if none).
func (q queues) head(key string) string {
	var first string
	var rev int64
	for token, e := range q[key] {
		if first == "" || e.rev < rev {
			first, rev = token, e.rev
		}
	}
	return first
}

// apply updates the mirror with events, in order, and returns what they
// announce, each key once, with the waiter first in its queue after all of
// events: deleted lease keys, and the lease keys of deleted queue entries
// unless the key was put at the same revision (etcd delivers all the events
// of one transaction in one response): the entry's waiter acquired it, and
// the others have nothing new to try; or a Release handed it to that
// waiter, which is announced to it alone (Next is its token) and noted for
// the store's Acquire (takeHanded). Any other put or delete of a lease key
// drops the store's note of a hand-off of it.
func (sub *subscription) apply(events []*clientv3.Event) []lease.Announcement {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q := sub.queues
	type at struct {
		key string
		rev int64
	}
	puts := make(map[at]*mvccpb.KeyValue)
	for _, ev := range events {
		if key, _, entry, ok := s.parseKey(ev.Kv.Key); ok && ev.Type == mvccpb.PUT && !entry {
			puts[at{key, ev.Kv.ModRevision}] = ev.Kv
		}
	}
	var keys []string
	var as []lease.Announcement
	seen := make(map[string]bool)
	for _, ev := range events {
		key, token, isEntry, ok := s.parseKey(ev.Kv.Key)
		if !ok {
			continue // a nested namespace's key
		}
		if ev.Type == mvccpb.PUT {
			if isEntry {
				q.put(key, token, ev.Kv, true)
			} else if h, ok := s.handed[key]; ok && h.rev < ev.Kv.ModRevision {
				delete(s.handed, key)
			}
			continue
		}
		if !isEntry {
			delete(s.handed, key)
		} else {
			q.del(key, token)
			if kv := puts[at{key, ev.Kv.ModRevision}]; kv != nil {
				if t, _, fence := decodeValue(kv.Value); t == token && fence > 0 && kv.CreateRevision != kv.ModRevision {
					s.handed[key] = handed{token: token, fence: fence, lease: clientv3.LeaseID(kv.Lease), created: kv.CreateRevision, rev: kv.ModRevision}
					as = append(as, lease.Announcement{Key: key, Next: token})
				}
				continue
			}
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		keys = append(keys, key)
	}
	for _, key := range keys {
		as = append(as, lease.Announcement{Key: key, Next: q.head(key)})
	}
	return as
}

// Close ends the watch and waits for its stream to shut down.
func (sub *subscription) Close() error {
	var err error
	sub.once.Do(func() {
		close(sub.done)
		sub.cancel()
		err = sub.w.Close()
		sub.s.mu.Lock()
		delete(sub.s.subs, sub)
		sub.s.mu.Unlock()
	})
	return err
}
