// Release announcements: one etcd watch on the store's prefix.

package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease/driver"
)

// Subscribe reads the keys under the store's prefix, opens one watch on the
// prefix from the revision after that read, and returns once etcd confirmed
// it. The read and the watch keep a mirror of the keys, readers and queues,
// which names the oldest entry of a key's queue, if exclusive, as an
// announcement's Next and guides the store's hand-offs (see Release and
// Acquire). Next announces a key when it is deleted (a release or an
// expiry), when its last reader's key is deleted, when an entry of its
// queue is deleted (a waiter left: the next one may now be first) and when
// a release hands it over; not when a waiter acquires it. The watch
// requires a leader: on a member that lost the quorum it ends, and Next
// returns an error.
func (s *Store) Subscribe(ctx context.Context) (driver.Subscription, error) {
	resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcdlease: subscribe: %w", err)
	}
	w := clientv3.NewWatcher(s.cli)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	sub := &subscription{s: s, w: w, cancel: cancel, queues: make(map[string]map[string]entry),
		readers: make(map[string]map[string]entry), holders: make(map[string]entry)}
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
	s.mu.Lock()
	s.subs[sub] = true
	s.mu.Unlock()
	return sub, nil
}

// subscription is one watch on the store's prefix.
type subscription struct {
	s       *Store
	w       clientv3.Watcher
	cancel  context.CancelFunc
	ch      clientv3.WatchChan
	pending []driver.Announcement // announced but not yet returned

	mu      sync.Mutex                  // guards the mirror (read by Release and Acquire)
	queues  map[string]map[string]entry // lease key → token → its entry
	readers map[string]map[string]entry // lease key → token → its reader key
	holders map[string]entry            // lease key → its holder's token (in holder), etcd lease, mod revision
}

// entry is a queue entry as the watch last saw it.
type entry struct {
	rev, lease int64 // create revision, etcd lease
	holder     string
	shared     bool // a shared waiter's entry
}

// apply records keys and entries put or deleted in the mirror.
func (sub *subscription) apply(kvs []*mvccpb.KeyValue, typ mvccpb.Event_EventType) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for _, kv := range kvs {
		key, token, kind, ok := sub.s.parseKey(kv.Key)
		switch {
		case !ok || kind == kindEpoch || kind == kindBroken:
		case kind == 0 && typ == mvccpb.PUT:
			token, _, _ := strings.Cut(string(kv.Value), "\x00")
			sub.holders[key] = entry{rev: kv.ModRevision, lease: kv.Lease, holder: token}
		case kind == 0:
			delete(sub.holders, key)
		case kind == kindReader:
			set(sub.readers, key, token, entry{}, typ == mvccpb.PUT)
		default:
			set(sub.queues, key, token, entry{kv.CreateRevision, kv.Lease, string(kv.Value), kind == kindShared}, typ == mvccpb.PUT)
		}
	}
}

// set puts (or, !put, deletes) m[key][token].
func set(m map[string]map[string]entry, key, token string, e entry, put bool) {
	switch {
	case put && m[key] == nil:
		m[key] = map[string]entry{token: e}
	case put:
		m[key][token] = e
	case len(m[key]) <= 1:
		delete(m, key)
	default:
		delete(m[key], token)
	}
}

// head returns key's oldest entry and its token ("" if none).
func (sub *subscription) head(key string) (string, entry) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	first, e := "", entry{}
	for token, x := range sub.queues[key] {
		if first == "" || x.rev < e.rev {
			first, e = token, x
		}
	}
	return first, e
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
// each once, with the head of its queue after all of them as Next if it is
// an exclusive waiter's. etcd delivers all the events of one transaction in
// one response, so an entry deleted at the revision its lease key or a
// reader key was put at is an acquisition (the key was created: announced
// to nobody) or a hand-off (announced to the new holder). A reader's key
// deleted is announced only when no reader is left; the epoch never. Keys
// of other layouts (a nested namespace's) are ignored.
func (sub *subscription) announce(events []*clientv3.Event) []driver.Announcement {
	type at struct {
		key string
		rev int64
	}
	put := make(map[at]*mvccpb.KeyValue)
	for _, ev := range events {
		sub.apply([]*mvccpb.KeyValue{ev.Kv}, ev.Type)
		if key, _, kind, ok := sub.s.parseKey(ev.Kv.Key); ok && (kind == 0 || kind == kindReader) && ev.Type == mvccpb.PUT {
			put[at{key, ev.Kv.ModRevision}] = ev.Kv
		}
	}
	var as []driver.Announcement
	seen := make(map[string]bool)
	for _, ev := range events {
		key, token, kind, ok := sub.s.parseKey(ev.Kv.Key)
		if !ok || ev.Type != mvccpb.DELETE || seen[key] || kind == kindEpoch || kind == kindBroken || kind == kindReader && sub.reading(key) {
			continue
		}
		a := driver.Announcement{Key: key}
		if kv := put[at{key, ev.Kv.ModRevision}]; (kind == kindWaiter || kind == kindShared) && kv != nil {
			if kv.CreateRevision == kv.ModRevision {
				continue
			}
			a.Next = token
		} else if t, e := sub.head(key); !e.shared {
			a.Next = t
		}
		seen[key] = true
		as = append(as, a)
	}
	return as
}

// reading returns whether key has readers.
func (sub *subscription) reading(key string) bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return len(sub.readers[key]) > 0
}

// Close ends the watch and waits for its stream to shut down.
func (sub *subscription) Close() error {
	sub.s.mu.Lock()
	delete(sub.s.subs, sub)
	sub.s.mu.Unlock()
	sub.cancel()
	return sub.w.Close()
}
