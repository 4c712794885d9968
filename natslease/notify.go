// Wake-ups from a KV watch (driver.Notifier).

package natslease

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/leasekit/lease/driver"
)

// Subscribe watches the namespace's keys: every delete, and every write
// that leaves a key without a holder (a release that keeps tombstones, a
// Break), is announced. The watch's ordered consumer lives on the server:
// announcements written while it is being recreated (the server restarted)
// may be missed, and waiters then wait for the holder's TTL.
func (s *Store) Subscribe(ctx context.Context) (driver.Subscription, error) {
	// The watch lives until Close: ctx bounds only its creation.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	w, err := s.kv.Watch(wctx, s.ns+".>", jetstream.UpdatesOnly())
	stop()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("natslease: subscribe: %w", err)
	}
	return &subscription{s: s, w: w, cancel: cancel}, nil
}

// subscription is a driver.Subscription over a KV watcher, whose reader is
// the NATS connection's.
type subscription struct {
	s      *Store
	w      jetstream.KeyWatcher
	cancel context.CancelFunc
}

// errEnded ends Next once the watch has stopped.
var errEnded = errors.New("natslease: next: the watch ended")

// Next returns the next key that may have been freed.
func (sub *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	for {
		select {
		case <-ctx.Done():
			return driver.Announcement{}, fmt.Errorf("natslease: next: %w", ctx.Err())
		case e, ok := <-sub.w.Updates():
			if !ok {
				return driver.Announcement{}, errEnded
			}
			if e == nil {
				continue
			}
			key, ok := sub.s.leaseKey(e.Key())
			if !ok {
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				return driver.Announcement{Key: key}, nil
			}
			if st, err := decode(e.Value(), e.Revision(), e.Created()); err == nil && st.Token == "" {
				return driver.Announcement{Key: key}, nil
			}
		}
	}
}

// Close stops the watch and unblocks Next. Closing twice is harmless.
func (sub *subscription) Close() error {
	defer sub.cancel()
	if err := sub.w.Stop(); err != nil && !errors.Is(err, nats.ErrBadSubscription) {
		return fmt.Errorf("natslease: close: %w", err)
	}
	return nil
}
