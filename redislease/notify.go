package redislease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/leasekit/lease/driver"
	"github.com/redis/go-redis/v9"
)

// errSubClosed is returned by Next after Close.
var errSubClosed = errors.New("redislease: subscription closed")

// channel is the namespace's release channel.
func (s *Store) channel() string { return s.prefix + "released" }

// Subscribe subscribes to the namespace's release channel and the store's
// own, on a dedicated connection of the client, and returns once Redis
// confirmed both. While a subscription is open, the store's waiters ask to
// be woken on its own channel.
func (s *Store) Subscribe(ctx context.Context) (driver.Subscription, error) {
	ps := s.client.Subscribe(ctx, s.channel(), s.channel()+":"+s.id)
	// A server that never answers must not hold Subscribe past ctx.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	var err error
	for n := 0; n < 2 && err == nil; n++ {
		var msg any
		msg, err = ps.Receive(ctx)
		if _, ok := msg.(*redis.Subscription); err == nil && !ok {
			err = fmt.Errorf("unexpected reply %T", msg)
		}
	}
	if !stop() || err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("redislease: subscribe: %w", errors.Join(ctx.Err(), err))
	}
	s.listening.Add(1)
	return &subscription{ps: ps, listening: &s.listening}, nil
}

// subscription is a driver.Subscription over a go-redis PubSub. Next must
// not be called concurrently with itself; Close may be called at any time.
type subscription struct {
	ps        *redis.PubSub
	listening *atomic.Int32 // the store's count of open subscriptions
	closed    atomic.Bool
}

// Next returns the next announcement: the message is the key, then NUL and
// the first waiter's token when one was queued. When ctx ends, a PING wakes
// the blocked read (a read deadline would drop the subscription).
func (s *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	stop := context.AfterFunc(ctx, func() { _ = s.ps.Ping(context.WithoutCancel(ctx)) })
	defer stop()
	for {
		if err := ctx.Err(); err != nil {
			return driver.Announcement{}, err
		}
		msg, err := s.ps.Receive(context.WithoutCancel(ctx))
		switch {
		case s.closed.Load():
			return driver.Announcement{}, errSubClosed
		case err != nil:
			return driver.Announcement{}, fmt.Errorf("redislease: subscription: %w", errors.Join(ctx.Err(), err))
		}
		if m, ok := msg.(*redis.Message); ok {
			key, next, _ := strings.Cut(m.Payload, "\x00")
			return driver.Announcement{Key: key, Next: next}, nil
		}
	}
}

// Close ends the subscription and unblocks Next.
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
