// Client.AcquireAll: all or none, no deadlock, one context for the set.

package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

// TestAcquireAllOverlapping: clients asking for overlapping sets in
// different orders all get through, and no key is ever used twice at once.
func TestAcquireAllOverlapping(t *testing.T) {
	st := memlease.New()
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sets := [][]string{{"a", "b", "c"}, {"c", "b"}, {"b", "a"}, {"c", "a"}, {"a", "c", "b"}}
	var inUse sync.Map // key -> *atomic.Int32
	for _, k := range []string{"a", "b", "c"} {
		inUse.Store(k, new(atomic.Int32))
	}
	var wg sync.WaitGroup
	for i, set := range sets {
		c, err := lease.New(st.Handle(), lease.WithTTL(time.Second), lease.WithHolder(fmt.Sprint("w", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Go(func() {
			for range 20 {
				m, err := c.AcquireAll(ctx, set...)
				if err != nil {
					t.Errorf("AcquireAll(%v): %v", set, err)
					return
				}
				for _, k := range set {
					if n, _ := inUse.Load(k); n.(*atomic.Int32).Add(1) != 1 {
						t.Errorf("key %s used by two holders at once", k)
					}
					if m.Fence(k) == 0 {
						t.Errorf("no fence for %s", k)
					}
				}
				time.Sleep(time.Millisecond)
				for _, k := range set {
					n, _ := inUse.Load(k)
					n.(*atomic.Int32).Add(-1)
				}
				if err := m.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
}

// TestAcquireAllNone: a key held elsewhere lets the keys before it go after
// the renew interval, and until ctx ends leaves none held; bad key lists are
// refused.
func TestAcquireAllNone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	other := f.other(t)
	b, err := other.TryAcquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := f.c.AcquireAll(wctx, "a", "b")
		done <- err
	}()
	held := func() bool { info, _ := f.c.Inspect(ctx, "a"); return info.Held }
	// Two heartbeats, the end of waiting while holding a, and the wait.
	until(t, "AcquireAll waiting for b, holding a", func() bool { return f.clk.Timers() >= 4 && held() })
	f.clk.Advance(lease.DefaultTTL / 3) // the longest it holds a idle
	since := f.clk.Now()
	// Released a, and waiting anew for b, refused once: a cancel before
	// that refusal would end the wait without the ErrHeld wanted below.
	waitingB := func() bool {
		for _, w := range f.c.Snapshot().Waiters {
			if w.Key == "b" && w.HeldBy != "" && !w.Since.Before(since) {
				return true
			}
		}
		return false
	}
	until(t, "AcquireAll waiting for b, holding nothing", func() bool { return !held() && waitingB() })
	cancel()
	if err := <-done; !errors.Is(err, lease.ErrHeld) || !errors.Is(err, context.Canceled) {
		t.Fatalf("AcquireAll = %v, want ErrHeld and context.Canceled", err)
	}
	if info, _ := f.c.Inspect(ctx, "a"); info.Held {
		t.Errorf("a is held after AcquireAll failed: %+v", info)
	}
	if _, err := f.c.TryAcquireAll(ctx, "a", "b"); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("TryAcquireAll with b held = %v, want ErrHeld", err)
	}
	if info, _ := f.c.Inspect(ctx, "a"); info.Held {
		t.Errorf("a is held after TryAcquireAll failed: %+v", info)
	}
	for _, keys := range [][]string{nil, {"a", "a"}, {"a", ""}} {
		if _, err := f.c.AcquireAll(ctx, keys...); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("AcquireAll(%q) = %v, want ErrInvalid", keys, err)
		}
	}
}

// TestAcquireAllContext: the set's context ends when one lease is lost.
func TestAcquireAllContext(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	m, err := f.c.AcquireAll(ctx, "x", "y")
	if err != nil {
		t.Fatal(err)
	}
	y := m.Leases()[1]
	if err := f.mem.Handle().Release(ctx, driver.Request{Key: y.Key(), Token: y.Token()}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(lease.DefaultTTL / 3) // the renewal finds y gone
	select {
	case <-m.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the set's context did not end when y was lost")
	}
	if !errors.Is(context.Cause(m.Context()), lease.ErrLost) || !errors.Is(m.Err(), lease.ErrLost) {
		t.Errorf("cause %v, Err %v; want ErrLost", context.Cause(m.Context()), m.Err())
	}
	if err := m.Release(ctx); !errors.Is(err, lease.ErrLost) || m.Leases()[0].Err() == nil {
		t.Errorf("Release = %v, want y's ErrLost, and x released", err)
	}
}

// lostOnce grants key a first with a closed Lost channel, and holds back
// the first grant of b until a lease has been lost.
type lostOnce struct {
	*memlease.Store
	lost   chan struct{} // closed when the Client reports a loss
	grants atomic.Int32
	held   sync.Once
}

func (s *lostOnce) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Key == "b" {
		s.held.Do(func() {
			select {
			case <-s.lost:
			case <-time.After(10 * time.Second):
			}
		})
	}
	g, err := s.Store.Acquire(ctx, r)
	if err == nil && r.Key == "a" && s.grants.Add(1) == 1 {
		dead := make(chan struct{})
		close(dead)
		g.Lost = dead
	}
	return g, err
}

// TestAcquireAllLostMeanwhile: a lease lost while the other keys are taken
// is taken again: the set returned is held at once.
func TestAcquireAllLostMeanwhile(t *testing.T) {
	st := &lostOnce{Store: memlease.New(), lost: make(chan struct{})}
	var once sync.Once
	c, err := lease.New(st, lease.WithObserver(lease.ObserverFunc(func(e lease.Event) {
		if e.Kind == lease.EventLost {
			once.Do(func() { close(st.lost) })
		}
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := c.AcquireAll(ctx, "b", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release(ctx)
	if err := m.Err(); err != nil || st.grants.Load() != 2 {
		t.Fatalf("set returned with Err %v after %d grants of a; want held, a taken again", err, st.grants.Load())
	}
}
