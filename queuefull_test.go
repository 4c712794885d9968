package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

// TestAcquireQueueFull: with a store whose queue holds two waiters, a third
// Acquire fails at once with a *QueueFullError (not after its ctx), while
// the two queued waiters still get the key in turn.
func TestAcquireQueueFull(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store := memlease.New(memlease.WithMaxWaiters(2))
	newClient := func() *lease.Client {
		c, err := lease.New(store.Handle(), lease.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	holder := newClient()
	l, err := holder.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lease.Lease, 2)
	errs := make(chan error, 2)
	for i := range 2 {
		c := newClient()
		go func() {
			l, err := c.Acquire(ctx, "k")
			if err != nil {
				errs <- err
				return
			}
			got <- l
		}()
		waitQueued(t, store, "k", i+1)
	}
	start := time.Now()
	_, err = newClient().Acquire(ctx, "k")
	var qf *lease.QueueFullError
	if !errors.Is(err, lease.ErrQueueFull) || !errors.As(err, &qf) || qf.Max != 2 || qf.Key != "k" || errors.Is(err, lease.ErrHeld) {
		t.Fatalf("third waiter: %v, want a *QueueFullError{Key: k, Max: 2}", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("third waiter refused after %v, want at once", d)
	}
	t.Logf("third waiter: %v", err)
	for range 2 {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case l = <-got:
		case err := <-errs:
			t.Fatalf("queued waiter: %v", err)
		case <-ctx.Done():
			t.Fatal("queued waiter never got the key")
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitQueued waits until key's queue in store holds n waiters: a queued
// Acquire of a fresh token reports them all ahead of it.
func waitQueued(t *testing.T, store *memlease.Store, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := store.Acquire(context.Background(), driver.Request{Key: key, Token: "probe-not-queued", TTL: time.Second})
		var he *lease.HeldError
		if errors.As(err, &he) && he.Queued >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters never queued on %q (last: %v)", n, key, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMaxWaitersInvalid: a store that declares a cap of waiters outside
// 0..MaxMaxWaiters is refused by lease.New with ErrInvalid.
func TestMaxWaitersInvalid(t *testing.T) {
	for _, n := range []int{-1, driver.MaxMaxWaiters + 1} {
		if c, err := lease.New(memlease.New(memlease.WithMaxWaiters(n))); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("lease.New over a store with MaxWaiters %d = %v, %v; want ErrInvalid", n, c, err)
		}
	}
	for _, n := range []int{1, driver.DefaultMaxWaiters, driver.MaxMaxWaiters} {
		c, err := lease.New(memlease.New(memlease.WithMaxWaiters(n)))
		if err != nil {
			t.Fatalf("lease.New over a store with MaxWaiters %d: %v", n, err)
		}
		_ = c.Close()
	}
}
