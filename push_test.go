// The core's use of lease.Pusher: a pushing subscription's announcements
// wake waiters through the function it was given, and its Next is read only
// for its end.

package lease_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/memlease"
)

// pushStore is a memlease handle whose subscriptions push: a fake of a
// store that learns of releases on a goroutine of its own.
type pushStore struct {
	*memlease.Store
	subs   atomic.Int32
	pushed atomic.Int32 // announcements handed to the Client's function
}

func (s *pushStore) Subscribe(ctx context.Context) (lease.Subscription, error) {
	inner, err := s.Store.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	s.subs.Add(1)
	return &pushSub{inner: inner.(lease.Announcer), closer: inner, s: s, done: make(chan struct{})}, nil
}

type pushSub struct {
	inner  lease.Announcer
	closer lease.Subscription
	s      *pushStore
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

func (p *pushSub) Push(f func(lease.Announcement)) bool {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			a, err := p.inner.NextAnnouncement(context.Background())
			if err != nil {
				return
			}
			p.s.pushed.Add(1)
			f(a)
		}
	}()
	return true
}

func (p *pushSub) Next(ctx context.Context) (string, error) {
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-p.done:
		return "", context.Canceled
	}
}

func (p *pushSub) Close() error {
	p.once.Do(func() { close(p.done) })
	err := p.closer.Close()
	p.wg.Wait()
	return err
}

// TestPusherWakesWaiter: with a pushing subscription, whose Next announces
// nothing, a waiter is woken by the push: long before its queue refresh
// (the renew interval, 3.3 s) and the holder's TTL.
func TestPusherWakesWaiter(t *testing.T) {
	root := memlease.New()
	t.Cleanup(func() { _ = root.Close() })
	ps := &pushStore{Store: root.Handle()}
	holder, err := lease.New(root.Handle(), lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	waiter, err := lease.New(ps, lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = waiter.Close() })
	ctx := testCtx(t, 20*time.Second)
	l, err := holder.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := waiter.Acquire(ctx, "k")
		if err == nil {
			err = l2.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // the waiter subscribes and queues
	released := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d > 2*time.Second {
			t.Errorf("waiter acquired %v after the release, want promptly (TTL 10s)", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken within 10s of the release")
	}
	if ps.subs.Load() == 0 {
		t.Error("the waiter's Client never subscribed")
	}
	if ps.pushed.Load() == 0 {
		t.Error("no announcement was pushed")
	}
}
