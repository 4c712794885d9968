// Release announcements (lease.Notifier) from one-shot ZooKeeper watches.

package zklease

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
)

// go-zookeeper v1.0.4 has no persistent recursive watches (AddWatch), so a
// subscription is built from one-shot watches: while a subscription is open,
// an Acquire that finds a key held sets a watch on the node it waits for (in
// the same call, before it returns the HeldError) and hands the watch to
// every open subscription. A queued waiter watches its predecessor in the
// queue only, so a release wakes the next waiter and no other; a plain try
// (without Request.Queue) watches the holder's node. Next waits on those watches without a goroutine of its
// own. A release that a waiter of this Store could miss cannot happen: the
// watch is set before the waiter goes to sleep, and if the node is already
// gone Acquire looks again instead of returning.

var (
	errSubClosed    = errors.New("zklease: subscription closed")
	errSessionEnded = errors.New("zklease: the ZooKeeper session ended; release watches were lost")
)

type watchEntry struct {
	ch    <-chan zk.Event
	key   string
	path  string // the watched node (sequential: a path is never reused)
	token string // the queued waiter that set the watch ("" for a plain try)
}

var _ lease.Announcer = (*subscription)(nil)

type subscription struct {
	s       *Store
	done    chan struct{} // closed by Close
	changed chan struct{} // a watch was added (capacity 1)
	once    sync.Once

	mu      sync.Mutex
	watches []watchEntry
	ended   bool // the session ended: Next reports it once
}

// Subscribe implements lease.Notifier. The subscription announces the
// release of every key that an Acquire through this Store found held since
// the subscription opened (the keys the Client's waiters wait for).
func (s *Store) Subscribe(ctx context.Context) (lease.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	sub := &subscription{s: s, done: make(chan struct{}), changed: make(chan struct{}, 1)}
	s.subs[sub] = struct{}{}
	return sub, nil
}

// watching reports whether a subscription is open.
func (s *Store) watching() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs) > 0
}

// addWatch hands a watch on node path of key, set for the queued waiter
// token ("" for a plain try), to every open subscription.
func (s *Store) addWatch(ch <-chan zk.Event, key, path, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		sub.add(watchEntry{ch, key, path, token})
	}
}

// add adds w unless the subscription already waits on the same node for the
// same waiter (a waiter's every attempt sets a watch on its predecessor):
// the pending watch fires on the same deletion, so the list stays as short
// as the set of watched nodes.
func (sub *subscription) add(w watchEntry) {
	sub.mu.Lock()
	for _, x := range sub.watches {
		if x.path == w.path && x.token == w.token {
			sub.mu.Unlock()
			return
		}
	}
	sub.watches = append(sub.watches, w)
	sub.mu.Unlock()
	sub.signal()
}

func (sub *subscription) signal() {
	select {
	case sub.changed <- struct{}{}:
	default:
	}
}

func (sub *subscription) sessionEnded() {
	sub.mu.Lock()
	sub.ended = true
	sub.watches = nil
	sub.mu.Unlock()
	sub.signal()
}

// Next implements lease.Subscription: it returns the key of a watched node
// once that node is deleted. It returns an error when the session ended
// (watches are lost with it: the Client then wakes all waiters).
func (sub *subscription) Next(ctx context.Context) (string, error) {
	a, err := sub.NextAnnouncement(ctx)
	return a.Key, err
}

// NextAnnouncement is Next naming the queued waiter whose predecessor's node
// was deleted (see [lease.Announcer]): it may be first now, and no other
// waiter of the key has anything new to try. A deleted node watched by a
// plain try names nobody.
func (sub *subscription) NextAnnouncement(ctx context.Context) (lease.Announcement, error) {
	for {
		sub.mu.Lock()
		if sub.ended {
			sub.ended = false
			sub.mu.Unlock()
			return lease.Announcement{}, errSessionEnded
		}
		watches := append([]watchEntry(nil), sub.watches...)
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
			return lease.Announcement{}, ctx.Err()
		case 1:
			return lease.Announcement{}, errSubClosed
		case 2:
			continue
		}
		w := watches[i-3]
		sub.remove(w.ch)
		if ok {
			if ev := v.Interface().(zk.Event); ev.Type == zk.EventNotWatching {
				return lease.Announcement{}, fmt.Errorf("zklease: watch on %q ended: %w", w.key, ev.Err)
			}
		}
		// A closed channel without a value: another subscription took the
		// event; announce the key all the same.
		return lease.Announcement{Key: w.key, Next: w.token}, nil
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

// Close implements lease.Subscription.
func (sub *subscription) Close() error {
	sub.once.Do(func() {
		close(sub.done)
		sub.s.mu.Lock()
		delete(sub.s.subs, sub)
		sub.s.mu.Unlock()
	})
	return nil
}
