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
	ch   <-chan zk.Event
	path string // a sequential node: its path is never reused
	a    driver.Announcement
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
	} else if err != nil {
		return false, fmt.Errorf("watch %s: %w", redactPath(path), err)
	}
	w := watch{ch: ch, path: path, a: driver.Announcement{Key: r.Key}}
	if r.Queue {
		w.a.Next = r.Token // the waiter right behind the node
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
		if x.path == w.path && x.a == w.a {
			return
		}
	}
	sub.watches = append(sub.watches, w)
	select {
	case sub.changed <- struct{}{}:
	default:
	}
}

// Next implements driver.Subscription: the announcement of a watched node
// once it is deleted. A watch that ends without its event (the session
// expired) is an error: the Client then wakes every waiter.
func (sub *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	for {
		sub.mu.Lock()
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(sub.done)}, {Dir: reflect.SelectRecv, Chan: reflect.ValueOf(sub.changed)}}
		for _, w := range sub.watches {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.ch)})
		}
		watches := sub.watches
		sub.mu.Unlock()
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
		sub.mu.Lock()
		for k := range sub.watches {
			if sub.watches[k].ch == w.ch {
				sub.watches = append(sub.watches[:k:k], sub.watches[k+1:]...)
				break
			}
		}
		sub.mu.Unlock()
		// A closed channel without a value: another subscription took the
		// event. Announce it all the same.
		if ev, _ := v.Interface().(zk.Event); ok && ev.Type == zk.EventNotWatching {
			return driver.Announcement{}, fmt.Errorf("zklease: watch on %q ended: %w", w.a.Key, ev.Err)
		}
		return w.a, nil
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
