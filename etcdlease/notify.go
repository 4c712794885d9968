// Release announcements: one etcd watch on the store's prefix; deletions of
// lease keys (releases and expiries) and of queue entries (a waiter gave up,
// expired or acquired) announce the lease key, naming the waiter now first in
// its queue (lease.Announcer) from a mirror of the queues the watch keeps.

package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
// transaction created the key (the entry's waiter acquired it: the others
// have nothing new to try). Each announcement names the waiter first in the
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

	// Used by Next only.
	pending []lease.Announcement // announcements not yet returned
	queues  queues               // the namespace's queues of waiters, as of the last event
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
			sub.pending = sub.queues.apply(resp.Events, sub.s.prefix)
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
// create revision of the token's entry.
type queues map[string]map[string]int64

// readQueues reads every queue entry under the store's prefix (keys only)
// and returns them with the revision of the read.
func (s *Store) readQueues(ctx context.Context) (queues, int64, error) {
	resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, 0, err
	}
	q := make(queues)
	for _, kv := range resp.Kvs {
		q.put(strings.TrimPrefix(string(kv.Key), s.prefix), kv.CreateRevision)
	}
	return q, resp.Header.Revision, nil
}

// put records the entry rel (an etcd key without the prefix) if it is one.
func (q queues) put(rel string, created int64) {
	key, token, ok := strings.Cut(rel, queueSep)
	if !ok {
		return
	}
	m := q[key]
	if m == nil {
		m = make(map[string]int64)
		q[key] = m
	}
	m[token] = created
}

// del forgets the entry rel if it is one.
func (q queues) del(rel string) {
	key, token, ok := strings.Cut(rel, queueSep)
	if !ok {
		return
	}
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
	for token, r := range q[key] {
		if first == "" || r < rev {
			first, rev = token, r
		}
	}
	return first
}

// apply updates the mirror with events, in order, and returns what they
// announce, each key once, with the waiter first in its queue after all of
// events: deleted lease keys, and the lease keys of deleted queue entries
// unless the key was created at the same revision (the entry's waiter
// acquired it; etcd delivers all the events of one transaction in one
// response).
func (q queues) apply(events []*clientv3.Event, prefix string) []lease.Announcement {
	type at struct {
		key string
		rev int64
	}
	created := make(map[at]bool)
	for _, ev := range events {
		if key, entry := leaseKeyOf(strings.TrimPrefix(string(ev.Kv.Key), prefix)); ev.Type == mvccpb.PUT && !entry {
			created[at{key, ev.Kv.ModRevision}] = true
		}
	}
	var keys []string
	seen := make(map[string]bool)
	for _, ev := range events {
		rel := strings.TrimPrefix(string(ev.Kv.Key), prefix)
		if ev.Type == mvccpb.PUT {
			q.put(rel, ev.Kv.CreateRevision)
			continue
		}
		q.del(rel)
		key, entry := leaseKeyOf(rel)
		if seen[key] || (entry && created[at{key, ev.Kv.ModRevision}]) {
			continue
		}
		seen[key] = true
		keys = append(keys, key)
	}
	as := make([]lease.Announcement, len(keys))
	for i, key := range keys {
		as[i] = lease.Announcement{Key: key, Next: q.head(key)}
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
