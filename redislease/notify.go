// Release announcements over Redis Pub/Sub (lease.Notifier).

package redislease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/leasekit/lease"
	"github.com/redis/go-redis/v9"
)

// errSubClosed is returned by Next after Close.
var errSubClosed = errors.New("redislease: subscription closed")

// Subscribe subscribes to the namespace's release channel (see the package
// documentation) and returns once Redis has confirmed the subscription, so
// every release published after it returns is delivered. It uses one
// dedicated connection of the client until the Subscription is closed.
func (s *Store) Subscribe(ctx context.Context) (lease.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redislease: subscribe: %w", err)
	}
	ps := s.client.Subscribe(ctx, s.channel, s.own)
	confirmed := 0
	// A server that accepted the connection but never answers must not hold
	// Subscribe past ctx: closing the PubSub unblocks Receive.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	for {
		msg, err := ps.Receive(ctx)
		if err == nil {
			if m, ok := msg.(*redis.Subscription); ok && m.Kind == "subscribe" && (m.Channel == s.channel || m.Channel == s.own) {
				if confirmed++; confirmed == 2 {
					break
				}
			}
			continue
		}
		if stop() {
			_ = ps.Close()
		}
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		}
		return nil, fmt.Errorf("redislease: subscribe %q: %w", s.channel, err)
	}
	if !stop() {
		// ctx ended just as the confirmation arrived; ps is closed.
		return nil, fmt.Errorf("redislease: subscribe %q: %w", s.channel, ctx.Err())
	}
	s.listening.Add(1)
	return &subscription{ps: ps, listening: &s.listening}, nil
}

var _ lease.Announcer = (*subscription)(nil)

// subscription is a lease.Subscription over a go-redis PubSub. Next must not
// be called concurrently with itself; Close may be called at any time.
type subscription struct {
	ps        *redis.PubSub
	listening *atomic.Int32 // the store's count of open subscriptions
	closed    atomic.Bool
}

// Next returns the next released key. When ctx ends, a PING on the
// subscription's connection wakes the blocked read, so Next returns promptly
// without a read deadline (which would make go-redis drop the connection and
// with it the subscription). A connection error is returned as is; the next
// call reconnects and subscribes again, and releases in between are lost.
func (s *subscription) Next(ctx context.Context) (string, error) {
	a, err := s.NextAnnouncement(ctx)
	return a.Key, err
}

// NextAnnouncement is Next with the token of the waiter at the head of the
// key's queue when it was released (see [lease.Announcer]): the message is
// the key, then a NUL byte and the token when a waiter is queued. It only
// wakes that waiter: a key handed to it is granted by its Acquire.
func (s *subscription) NextAnnouncement(ctx context.Context) (lease.Announcement, error) {
	if err := ctx.Err(); err != nil {
		return lease.Announcement{}, err
	}
	stop := context.AfterFunc(ctx, func() { _ = s.ps.Ping(context.WithoutCancel(ctx)) })
	defer stop()
	rctx := context.WithoutCancel(ctx)
	for {
		msg, err := s.ps.Receive(rctx)
		if err != nil {
			if s.closed.Load() {
				return lease.Announcement{}, errSubClosed
			}
			if cerr := ctx.Err(); cerr != nil {
				return lease.Announcement{}, cerr
			}
			return lease.Announcement{}, fmt.Errorf("redislease: subscription: %w", err)
		}
		if m, ok := msg.(*redis.Message); ok {
			key, rest, _ := strings.Cut(m.Payload, "\x00")
			return lease.Announcement{Key: key, Next: announced(rest)}, nil
		}
		// Subscription confirmations (also after a reconnect) and our own
		// wake-up pongs.
		if err := ctx.Err(); err != nil {
			return lease.Announcement{}, err
		}
	}
}

// Close ends the subscription, frees its connection and unblocks Next.
func (s *subscription) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.listening.Add(-1)
	if err := s.ps.Close(); err != nil {
		return fmt.Errorf("redislease: close subscription: %w", err)
	}
	return nil
}
