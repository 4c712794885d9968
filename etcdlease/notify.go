// Release announcements: one etcd watch on the store's prefix; deletions of
// lease keys (releases and expiries) and of queue entries (a waiter gave up,
// expired or acquired) announce the lease key.

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
// have nothing new to try). The watch requires
// a leader: on a member that loses the quorum it ends, and Next returns an
// error. Each subscription has its own watch stream; Close ends it.
func (s *Store) Subscribe(ctx context.Context) (lease.Subscription, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	w := clientv3.NewWatcher(s.cli)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	// Until the watch is created, ctx bounds it (Watch itself may block while
	// the client connects).
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	ch := w.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	sub := &subscription{s: s, w: w, cancel: cancel, ch: ch, done: make(chan struct{})}
	fail := func(err error) (lease.Subscription, error) {
		_ = sub.Close()
		return nil, fmt.Errorf("etcdlease: subscribe: %w", err)
	}
	select {
	case resp, ok := <-ch:
		switch {
		case !ok:
			return fail(errors.New("the watch closed before it was created"))
		case resp.Err() != nil:
			return fail(resp.Err())
		case !resp.Created:
			return fail(errors.New("the first watch response is not the creation notice"))
		}
	case <-ctx.Done():
		return fail(ctx.Err())
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

// subscription is one watch on the store's prefix.
type subscription struct {
	s      *Store
	w      clientv3.Watcher
	cancel context.CancelFunc
	ch     clientv3.WatchChan
	done   chan struct{}
	once   sync.Once

	pending []string // released keys not yet returned; used by Next only
}

// Next returns the next released key (without the prefix), or an error when
// ctx ends, the subscription is closed or the watch broke (announcements may
// then have been missed).
func (sub *subscription) Next(ctx context.Context) (string, error) {
	for len(sub.pending) == 0 {
		select {
		case resp, ok := <-sub.ch:
			if !ok {
				select {
				case <-sub.done:
					return "", errSubClosed
				default:
					return "", errors.New("etcdlease: the watch ended")
				}
			}
			if err := resp.Err(); err != nil {
				return "", fmt.Errorf("etcdlease: watch: %w", err)
			}
			if resp.Canceled {
				return "", errors.New("etcdlease: the watch was cancelled")
			}
			sub.pending = announced(resp.Events, sub.s.prefix)
		case <-ctx.Done():
			return "", ctx.Err()
		case <-sub.done:
			return "", errSubClosed
		}
	}
	key := sub.pending[0]
	sub.pending = sub.pending[1:]
	return key, nil
}

// announced returns the lease keys (without the prefix) that events
// announce, each once: deleted lease keys, and the lease keys of deleted
// queue entries unless the key was created at the same revision (etcd
// delivers all the events of one transaction in one response).
func announced(events []*clientv3.Event, prefix string) []string {
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
		if ev.Type != mvccpb.DELETE {
			continue
		}
		key, entry := leaseKeyOf(strings.TrimPrefix(string(ev.Kv.Key), prefix))
		if seen[key] || (entry && created[at{key, ev.Kv.ModRevision}]) {
			continue
		}
		seen[key] = true
		keys = append(keys, key)
	}
	return keys
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
