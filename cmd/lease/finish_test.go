// finish, in process: lease run's exit code once the command has ended,
// when the lease was lost before (noticed or not) or held throughout.

package main

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

// goneStore is a memlease store that, once gone is set, answers every
// renewal and release as a store that no longer has the token would.
type goneStore struct {
	driver.Store
	gone atomic.Bool
}

func (s *goneStore) Renew(ctx context.Context, r driver.Request) error {
	if s.gone.Load() {
		return lease.ErrNotHeld
	}
	return s.Store.Renew(ctx, r)
}

func (s *goneStore) Release(ctx context.Context, r driver.Request) error {
	if s.gone.Load() {
		return lease.ErrNotHeld
	}
	return s.Store.Release(ctx, r)
}

func acquireOn(t *testing.T, s driver.Store, ttl time.Duration) *lease.Lease {
	t.Helper()
	c, err := lease.New(s, lease.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestFinish(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Run("held", func(t *testing.T) {
		s := memlease.New()
		l := acquireOn(t, s, 10*time.Second)
		if code := finish(l, l.TTL(), 3, log); code != 3 {
			t.Errorf("exit %d, want the command's 3", code)
		}
		if info, err := s.Inspect(context.Background(), "k"); err != nil || info.Held {
			t.Errorf("after finish: %+v, %v; want released", info, err)
		}
	})
	t.Run("lost-noticed-after-the-command", func(t *testing.T) {
		s := &goneStore{Store: memlease.New()}
		l := acquireOn(t, s, 300*time.Millisecond)
		s.gone.Store(true)
		select { // the heartbeat finds the token gone; the command had exited 0
		case <-l.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("the lease was not lost")
		}
		if code := finish(l, l.TTL(), 0, log); code != exitLost {
			t.Errorf("exit %d, want %d", code, exitLost)
		}
	})
	t.Run("lost-found-at-release", func(t *testing.T) {
		s := &goneStore{Store: memlease.New()}
		l := acquireOn(t, s, time.Minute) // no renewal before finish
		s.gone.Store(true)
		if l.Err() != nil {
			t.Fatalf("the lease is already lost: %v", l.Err())
		}
		if code := finish(l, l.TTL(), 0, log); code != exitLost {
			t.Errorf("exit %d, want %d", code, exitLost)
		}
	})
}
