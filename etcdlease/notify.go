// Release announcements: one etcd watch on the store's prefix.

package etcdlease

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease/driver"
)

// Subscribe reads the queue entries under the store's prefix (keys only),
// opens one watch on the prefix from the revision after that read, and
// returns once etcd confirmed it. Next announces a key when it is deleted (a
// release or an expiry) and when an entry of its queue is deleted (a waiter
// left: the next one may now be first), except when the same transaction
// created the key (that waiter acquired it). Each announcement names the
// oldest entry of the key's queue as Next, from a mirror of the queues that
// the watch keeps current. The watch requires a leader: on a member that
// lost the quorum it ends, and Next returns an error.
func (s *Store) Subscribe(ctx context.Context) (driver.Subscription, error) {
	resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("etcdlease: subscribe: %w", err)
	}
	w := clientv3.NewWatcher(s.cli)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	sub := &subscription{s: s, w: w, cancel: cancel, queues: make(map[string]map[string]int64)}
	sub.apply(resp.Kvs, mvccpb.PUT)
	// Until the watch is created, ctx bounds it (Watch itself may block while
	// the client connects).
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	sub.ch = w.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify(), clientv3.WithRev(resp.Header.Revision+1))
	select {
	case resp, ok := <-sub.ch:
		switch {
		case !ok:
			err = errors.New("the watch closed before it was created")
		case resp.Err() != nil:
			err = resp.Err()
		case !resp.Created:
			err = errors.New("the first watch response is not the creation notice")
		}
	case <-ctx.Done():
	}
	if err == nil && !stop() {
		err = ctx.Err()
	}
	if err != nil {
		_ = sub.Close()
		return nil, fmt.Errorf("etcdlease: subscribe: %w", err)
	}
	return sub, nil
}

// subscription is one watch on the store's prefix.
type subscription struct {
	s       *Store
	w       clientv3.Watcher
	cancel  context.CancelFunc
	ch      clientv3.WatchChan
	pending []driver.Announcement       // announced but not yet returned
	queues  map[string]map[string]int64 // lease key → token → create revision of its entry
}

// apply records entries put or deleted in the mirror of the queues.
func (sub *subscription) apply(kvs []*mvccpb.KeyValue, typ mvccpb.Event_EventType) {
	for _, kv := range kvs {
		key, token, entry, ok := sub.s.parseKey(kv.Key)
		switch {
		case !ok || !entry:
		case typ == mvccpb.PUT && sub.queues[key] == nil:
			sub.queues[key] = map[string]int64{token: kv.CreateRevision}
		case typ == mvccpb.PUT:
			sub.queues[key][token] = kv.CreateRevision
		case len(sub.queues[key]) <= 1:
			delete(sub.queues, key)
		default:
			delete(sub.queues[key], token)
		}
	}
}

// head returns the token of key's oldest entry ("" if none).
func (sub *subscription) head(key string) string {
	first, rev := "", int64(0)
	for token, r := range sub.queues[key] {
		if first == "" || r < rev {
			first, rev = token, r
		}
	}
	return first
}

// Next returns the next announcement, or an error when ctx ends, the
// subscription is closed or the watch broke.
func (sub *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	for len(sub.pending) == 0 {
		select {
		case resp, ok := <-sub.ch:
			switch {
			case !ok:
				return driver.Announcement{}, errors.New("etcdlease: the watch ended")
			case resp.Err() != nil:
				return driver.Announcement{}, fmt.Errorf("etcdlease: watch: %w", resp.Err())
			case resp.Canceled:
				return driver.Announcement{}, errors.New("etcdlease: the watch was cancelled")
			}
			sub.pending = sub.announce(resp.Events)
		case <-ctx.Done():
			return driver.Announcement{}, ctx.Err()
		}
	}
	a := sub.pending[0]
	sub.pending = sub.pending[1:]
	return a, nil
}

// announce applies events to the mirror and returns the keys they announce,
// each once, with the head of its queue after all of them. etcd delivers all
// the events of one transaction in one response, so an entry deleted at the
// revision its lease key was put at is an acquisition, announced to nobody.
// Keys of other layouts (a nested namespace's) are ignored.
func (sub *subscription) announce(events []*clientv3.Event) []driver.Announcement {
	type at struct {
		key string
		rev int64
	}
	put := make(map[at]bool)
	for _, ev := range events {
		sub.apply([]*mvccpb.KeyValue{ev.Kv}, ev.Type)
		if key, _, entry, ok := sub.s.parseKey(ev.Kv.Key); ok && !entry && ev.Type == mvccpb.PUT {
			put[at{key, ev.Kv.ModRevision}] = true
		}
	}
	var as []driver.Announcement
	seen := make(map[string]bool)
	for _, ev := range events {
		key, _, entry, ok := sub.s.parseKey(ev.Kv.Key)
		if !ok || ev.Type != mvccpb.DELETE || seen[key] || (entry && put[at{key, ev.Kv.ModRevision}]) {
			continue
		}
		seen[key] = true
		as = append(as, driver.Announcement{Key: key, Next: sub.head(key)})
	}
	return as
}

// Close ends the watch and waits for its stream to shut down.
func (sub *subscription) Close() error {
	sub.cancel()
	return sub.w.Close()
}
