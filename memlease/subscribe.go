// Release announcements: Store.Subscribe and the Subscription it returns.

package memlease

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasekit/lease/driver"
)

// ErrOverflow is returned (wrapped) by Next when more than MaxPending
// announcements piled up unread and some were dropped; the caller should
// assume any key may have been released.
var ErrOverflow = errors.New("memlease: subscription overflowed, announcements were missed")

// MaxPending is how many unread announcements a Subscription queues before it
// drops them and reports [ErrOverflow].
const MaxPending = 4096

// subscription is the driver.Subscription of a Store. Its queue and flags are
// guarded by the shared state's mutex, which Release holds while announcing.
type subscription struct {
	st     *state
	owner  *Store
	signal chan struct{} // capacity 1: "the queue may have grown"
	done   chan struct{} // closed by close

	queue  []driver.Announcement
	missed bool
	closed bool
}

// Subscribe opens a subscription to the release of every key of the Store,
// through any handle. It is active when Subscribe returns. The subscription
// ends when it or this handle is closed.
func (s *Store) Subscribe(ctx context.Context) (driver.Subscription, error) {
	if err := s.check(ctx, "subscribe"); err != nil {
		return nil, err
	}
	sub := &subscription{st: s.st, owner: s, signal: make(chan struct{}, 1), done: make(chan struct{})}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, fmt.Errorf("memlease: subscribe: %w", ErrClosed)
	}
	if s.subs == nil {
		s.subs = make(map[*subscription]struct{})
	}
	s.subs[sub] = struct{}{}
	s.st.mu.Lock()
	s.st.subs[sub] = struct{}{}
	s.st.mu.Unlock()
	s.mu.Unlock()
	return sub, nil
}

// announceLocked queues a; st.mu is held.
func (sub *subscription) announceLocked(a driver.Announcement) {
	if sub.closed {
		return
	}
	if len(sub.queue) >= MaxPending {
		sub.missed = true
		sub.queue = nil
	} else if !sub.missed {
		sub.queue = append(sub.queue, a)
	}
	select {
	case sub.signal <- struct{}{}:
	default:
	}
}

// Next returns the next announcement (the key, and the token at the head of
// its queue when it was released), waiting until there is one, ctx ends or
// the subscription is closed. After an overflow it returns an error matching
// [ErrOverflow] once, then resumes delivering.
func (sub *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	for {
		sub.st.mu.Lock()
		switch {
		case sub.closed:
			sub.st.mu.Unlock()
			return driver.Announcement{}, fmt.Errorf("memlease: next: %w", ErrClosed)
		case sub.missed:
			sub.missed = false
			sub.st.mu.Unlock()
			return driver.Announcement{}, fmt.Errorf("memlease: next: %w", ErrOverflow)
		case len(sub.queue) > 0:
			a := sub.queue[0]
			sub.queue[0] = driver.Announcement{}
			sub.queue = sub.queue[1:]
			sub.st.mu.Unlock()
			return a, nil
		}
		sub.st.mu.Unlock()
		select {
		case <-sub.signal:
		case <-sub.done:
		case <-ctx.Done():
			return driver.Announcement{}, fmt.Errorf("memlease: next: %w", ctx.Err())
		}
	}
}

// Close ends the subscription and unblocks Next. Closing twice is harmless.
func (sub *subscription) Close() error {
	sub.close()
	return nil
}

func (sub *subscription) close() {
	sub.st.mu.Lock()
	if sub.closed {
		sub.st.mu.Unlock()
		return
	}
	sub.closed = true
	sub.queue = nil
	delete(sub.st.subs, sub)
	close(sub.done)
	sub.st.mu.Unlock()

	sub.owner.mu.Lock()
	delete(sub.owner.subs, sub)
	sub.owner.mu.Unlock()
}
