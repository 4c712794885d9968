// Release announcements (driver.Notifier) from one-shot ZooKeeper watches.

package zklease

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease/driver"
)

var errSubClosed = errors.New("zklease: subscription closed")

// watch names a child watch on one node, which fires only when the node
// is deleted (a data watch would fire on every renewal).
type watch struct {
	path string // a sequential node: its path is never reused
	a    driver.Announcement
}

// subscription's fields are guarded by its Store's mu.
type subscription struct {
	s       *Store
	changed chan struct{} // a watch was added (capacity 1); closed by Close
	watches map[watch]<-chan zk.Event
}

// Subscribe implements driver.Notifier. While a subscription is open, an
// Acquire of this Store that finds the key held watches the node it waits
// for (a queued waiter its predecessor, another try the lowest node) before
// it returns, so no release it waits for goes unannounced.
func (s *Store) Subscribe(ctx context.Context) (driver.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sub := &subscription{s: s, changed: make(chan struct{}, 1), watches: make(map[watch]<-chan zk.Event)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil { // closed
		return nil, errClosed
	}
	s.subs[sub] = struct{}{}
	return sub, nil
}

// watch watches the node at path for key and hands the watch to every open
// subscription, to announce next (if any) on its deletion; errAgain: the
// node is already gone. A node watched again keeps one entry, the latest
// watch: both fire.
func (s *Store) watch(key, next, path string) error {
	s.mu.Lock()
	n := len(s.subs)
	s.mu.Unlock()
	if n == 0 {
		return nil
	}
	_, _, ch, err := s.conn.ChildrenW(path)
	if errors.Is(err, zk.ErrNoNode) {
		return errAgain
	} else if err != nil {
		return fmt.Errorf("watch %s: %w", redactPath(path), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		sub.watches[watch{path: path, a: driver.Announcement{Key: key, Next: next}}] = ch
		select {
		case sub.changed <- struct{}{}:
		default:
		}
	}
	return nil
}

// Next implements driver.Subscription: the announcement of a watched node
// once it is deleted, or once its watch ended without the event (the
// session ended; or another subscription took the event, and the channel
// is closed): the waiter then looks again.
func (sub *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(sub.changed)}}
		var watches []watch // of cases[2:]
		sub.s.mu.Lock()
		for w, ch := range sub.watches {
			watches = append(watches, w)
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		sub.s.mu.Unlock()
		i, _, ok := reflect.Select(cases)
		switch {
		case i == 0:
			return driver.Announcement{}, ctx.Err()
		case i == 1 && !ok:
			return driver.Announcement{}, errSubClosed
		case i == 1:
			continue
		}
		w := watches[i-2]
		sub.s.mu.Lock()
		delete(sub.watches, w)
		sub.s.mu.Unlock()
		return w.a, nil
	}
}

// Close implements driver.Subscription.
func (sub *subscription) Close() error {
	sub.s.mu.Lock()
	defer sub.s.mu.Unlock()
	if _, ok := sub.s.subs[sub]; ok {
		delete(sub.s.subs, sub)
		close(sub.changed)
	}
	return nil
}
