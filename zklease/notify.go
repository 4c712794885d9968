// Release announcements (driver.Notifier) from one-shot ZooKeeper watches.

package zklease

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease/driver"
)

var errSubClosed = errors.New("zklease: subscription closed")

// watch is a child watch on one node: it fires only when the node is
// deleted (a data watch would fire on every renewal).
type watch struct {
	ch    <-chan zk.Event
	key   string
	path  string // a sequential node: its path is never reused
	token string // the queued waiter behind it; "" for an unqueued try
}

type subscription struct {
	s       *Store
	done    chan struct{}
	changed chan struct{} // a watch was added (capacity 1)
	once    sync.Once

	mu      sync.Mutex
	watches []watch
}

// Subscribe implements driver.Notifier. While a subscription is open, an
// Acquire of this Store that finds the key held watches the node it waits
// for (a queued waiter its predecessor, another try the lowest node) before
// it returns, so no release it waits for goes unannounced.
func (s *Store) Subscribe(ctx context.Context) (driver.Subscription, error) {
	if _, err := s.usable(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := &subscription{s: s, done: make(chan struct{}), changed: make(chan struct{}, 1)}
	s.subs[sub] = struct{}{}
	return sub, nil
}

// watch watches the node at path for r and hands the watch to every open
// subscription; gone reports that the node is already gone.
func (s *Store) watch(r driver.Request, path string) (gone bool, err error) {
	s.mu.Lock()
	n := len(s.subs)
	s.mu.Unlock()
	if n == 0 {
		return false, nil
	}
	_, _, ch, err := s.conn.ChildrenW(path)
	if errors.Is(err, zk.ErrNoNode) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("watch %s: %w", redactPath(path), err)
	}
	w := watch{ch: ch, key: r.Key, path: path}
	if r.Queue {
		w.token = r.Token
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		sub.add(w)
	}
	return false, nil
}

// add adds w unless the subscription waits for the same node already.
func (sub *subscription) add(w watch) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for _, x := range sub.watches {
		if x.path == w.path && x.token == w.token {
			return
		}
	}
	sub.watches = append(sub.watches, w)
	select {
	case sub.changed <- struct{}{}:
	default:
	}
}

// Next implements driver.Subscription: the key of a watched node once it is
// deleted; Announcement.Next is the waiter queued right behind it. A watch
// that ends without its event (the session expired) is an error: the
// Client then wakes every waiter.
func (sub *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	for {
		sub.mu.Lock()
		watches := append([]watch(nil), sub.watches...)
		sub.mu.Unlock()
		cases := make([]reflect.SelectCase, 3, 3+len(watches))
		cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
		cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(sub.done)}
		cases[2] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(sub.changed)}
		for _, w := range watches {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.ch)})
		}
		i, v, ok := reflect.Select(cases)
		switch i {
		case 0:
			return driver.Announcement{}, ctx.Err()
		case 1:
			return driver.Announcement{}, errSubClosed
		case 2:
			continue
		}
		w := watches[i-3]
		sub.remove(w.ch)
		if ok {
			if ev := v.Interface().(zk.Event); ev.Type == zk.EventNotWatching {
				return driver.Announcement{}, fmt.Errorf("zklease: watch on %q ended: %w", w.key, ev.Err)
			}
		}
		// A closed channel without a value: another subscription took the
		// event. Announce the key all the same.
		return driver.Announcement{Key: w.key, Next: w.token}, nil
	}
}

func (sub *subscription) remove(ch <-chan zk.Event) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for k, w := range sub.watches {
		if w.ch == ch {
			sub.watches = append(sub.watches[:k], sub.watches[k+1:]...)
			return
		}
	}
}

// Close implements driver.Subscription.
func (sub *subscription) Close() error {
	sub.once.Do(func() {
		close(sub.done)
		sub.s.mu.Lock()
		delete(sub.s.subs, sub)
		sub.s.mu.Unlock()
	})
	return nil
}
