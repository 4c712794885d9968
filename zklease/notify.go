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
// (without Request.Queue) watches the holder's node. Next waits on those
// watches without a goroutine of its own; a subscription of a Store made by
// Dial pushes instead (see Push). A release that a waiter of this Store could miss cannot happen: the
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
	moved bool   // a watch on the node before the waiter's predecessor: its deletion moves the waiter up
}

// announcement is what the watch's firing announces.
func (w watchEntry) announcement() lease.Announcement {
	return lease.Announcement{Key: w.key, Next: w.token, Moved: w.moved}
}

var _ lease.Announcer = (*subscription)(nil)

type subscription struct {
	s       *Store
	done    chan struct{} // closed by Close
	changed chan struct{} // a watch was added, or the session ended (capacity 1)
	once    sync.Once

	mu      sync.Mutex
	watches []watchEntry
	ended   bool                     // the session ended: Next reports it once
	push    func(lease.Announcement) // set by Push: announcements go there
}

var _ lease.Pusher = (*subscription)(nil)

// Push implements lease.Pusher for a Store made by Dial: its connection's
// event callback sees each deletion of a watched node on the library's
// receiving goroutine, which then calls f at once, so the waiter is woken
// without Next's goroutine in between. A Store made by New cannot push.
func (sub *subscription) Push(f func(lease.Announcement)) bool {
	if !sub.s.tracked || f == nil {
		return false
	}
	sub.mu.Lock()
	sub.push = f
	// Watches that fired before Push: their events are in their channels.
	var fired []lease.Announcement
	kept := sub.watches[:0]
	for _, w := range sub.watches {
		if firedChan(w.ch) {
			fired = append(fired, w.announcement())
		} else {
			kept = append(kept, w)
		}
	}
	sub.watches = kept
	sub.mu.Unlock()
	sub.signal() // Next stops waiting on the watches
	for _, a := range fired {
		f(a)
	}
	return true
}

// watchFired pushes the announcements of the watches on the deleted node
// path to the subscriptions that push.
func (s *Store) watchFired(path string) {
	s.mu.Lock()
	subs := make([]*subscription, 0, len(s.subs))
	for sub := range s.subs {
		subs = append(subs, sub)
	}
	s.mu.Unlock()
	for _, sub := range subs {
		sub.fired(path)
	}
}

// fired removes the subscription's watches on path and pushes their
// announcements, if the subscription pushes.
func (sub *subscription) fired(path string) {
	sub.mu.Lock()
	f := sub.push
	if f == nil {
		sub.mu.Unlock()
		return
	}
	var as []lease.Announcement
	kept := sub.watches[:0]
	for _, w := range sub.watches {
		if w.path == path {
			as = append(as, w.announcement())
		} else {
			kept = append(kept, w)
		}
	}
	sub.watches = kept
	sub.mu.Unlock()
	for _, a := range as {
		f(a)
	}
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

// addWatch hands the watch w (on node w.path of w.key, set for the queued
// waiter w.token, "" for a plain try) to every open subscription. gone: the
// event callback has already seen the node deleted (it runs before the
// watch's channel gets the event, and may run before Acquire hands the watch
// over).
func (s *Store) addWatch(w watchEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gone := s.deletedLocked(w.path)
	for sub := range s.subs {
		sub.add(w, gone)
	}
}

// watch sets a child watch on node w.path, which fires only when that node
// is deleted (a data watch would fire on every refresh), and hands it to
// every open subscription; gone reports that the node is already gone (look
// again).
func (s *Store) watch(w watchEntry) (gone bool, err error) {
	_, _, ch, err := s.conn.ChildrenW(w.path)
	if errors.Is(err, zk.ErrNoNode) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("watch %s: %w", redactPath(w.path), err)
	}
	w.ch = ch
	s.addWatch(w)
	return false, nil
}

// add adds w unless the subscription already waits on the same node for the
// same waiter (a waiter's every attempt sets a watch on its predecessor):
// the pending watch fires on the same deletion, so the list stays as short
// as the set of watched nodes.
// A pushing subscription announces at once a watch whose node is already
// gone: seen by the callback lately, or its event already in the channel
// (should more deletions than the store remembers have come in between).
func (sub *subscription) add(w watchEntry, gone bool) {
	sub.mu.Lock()
	if f := sub.push; f != nil && (gone || firedChan(w.ch)) {
		sub.mu.Unlock()
		f(w.announcement())
		return
	}
	for _, x := range sub.watches {
		if x.path == w.path && x.token == w.token {
			sub.mu.Unlock()
			return
		}
	}
	sub.watches = append(sub.watches, w)
	pushing := sub.push != nil
	sub.mu.Unlock()
	if !pushing {
		sub.signal() // Next waits on the new watch too
	}
}

// firedChan reports whether a watch's channel holds its event (or is closed).
func firedChan(ch <-chan zk.Event) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
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
// once that node is deleted, skipping the deletions that only move a waiter
// up (Announcement.Moved: not a release). It returns an error when the
// session ended (watches are lost with it: the Client then wakes all
// waiters).
func (sub *subscription) Next(ctx context.Context) (string, error) {
	for {
		a, err := sub.NextAnnouncement(ctx)
		if err != nil || !a.Moved {
			return a.Key, err
		}
	}
}

// NextAnnouncement is Next naming the queued waiter whose predecessor's node
// was deleted (see [lease.Announcer]): it may be first now, and no other
// waiter of the key has anything new to try. A deleted node watched by a
// plain try names nobody. The deletion of the node before a waiter's
// predecessor names that waiter as Moved (see the package documentation).
func (sub *subscription) NextAnnouncement(ctx context.Context) (lease.Announcement, error) {
	for {
		sub.mu.Lock()
		if sub.ended {
			sub.ended = false
			sub.mu.Unlock()
			return lease.Announcement{}, errSessionEnded
		}
		if sub.push != nil {
			// Announcements are pushed: wait for the end only.
			sub.mu.Unlock()
			select {
			case <-ctx.Done():
				return lease.Announcement{}, ctx.Err()
			case <-sub.done:
				return lease.Announcement{}, errSubClosed
			case <-sub.changed:
				continue
			}
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
		return w.announcement(), nil
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
