// Tests of Client.List, ForceRelease and Watch on the in-memory store.
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

func TestWatch(t *testing.T) {
	cs, store := memClients(t, 2, lease.WithTTL(2*time.Second))
	ctx := testCtx(t, 30*time.Second)
	changes := make(chan lease.Change, 16)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		defer close(changes)
		for ch, err := range cs[1].Watch(wctx, "w/", 20*time.Millisecond) {
			if err != nil {
				done <- err
				return
			}
			changes <- ch
		}
		done <- nil
	}()
	next := func(want lease.ChangeKind, key string) lease.Change {
		t.Helper()
		select {
		case ch := <-changes:
			if ch.Kind != want || ch.Key != key {
				t.Fatalf("change = %+v, want %s of %q", ch, want, key)
			}
			return ch
		case err := <-done:
			t.Fatalf("Watch ended waiting for %s of %q: %v", want, key, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s change of %q within 10s", want, key)
		}
		return lease.Change{}
	}
	time.Sleep(50 * time.Millisecond) // the first listing: no changes for what is there
	l, err := cs[0].TryAcquire(ctx, "w/a")
	if err != nil {
		t.Fatal(err)
	}
	if ch := next(lease.ChangeAcquired, "w/a"); ch.Holder.Fence != l.Fence() || ch.Holder.ID == l.Token() {
		t.Errorf("acquired change = %+v, want fence %d and a digest, not the token", ch, l.Fence())
	}
	if _, err := cs[0].TryAcquire(ctx, "x/outside"); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next(lease.ChangeReleased, "w/a")
	l, err = cs[0].TryAcquire(ctx, "w/b")
	if err != nil {
		t.Fatal(err)
	}
	next(lease.ChangeAcquired, "w/b")
	if _, err := cs[1].ForceRelease(ctx, "w/b"); err != nil {
		t.Fatal(err)
	}
	next(lease.ChangeBroken, "w/b")
	<-l.Done()
	if !errors.Is(l.Err(), lease.ErrBroken) {
		t.Errorf("the broken lease's Err = %v, want one matching ErrBroken", l.Err())
	}
	// A holder that dies: its TTL runs out.
	r := driver.Request{Key: "w/c", Token: "0123456789abcdef0123456789abcdef", Holder: "dead", TTL: 300 * time.Millisecond}
	if _, err := store.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	next(lease.ChangeAcquired, "w/c")
	next(lease.ChangeExpired, "w/c")
	stop()
	if err := <-done; err != nil {
		t.Errorf("Watch: %v", err)
	}
	for ch := range changes {
		t.Errorf("unexpected change %+v", ch)
	}
}

func TestListUnsupported(t *testing.T) {
	c, err := lease.New(memlease.Plain(memlease.New()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t, 10*time.Second)
	for _, err := range c.List(ctx, "") {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("List on a store without Lister: %v, want ErrUnsupported", err)
		}
	}
	if _, err := c.ForceRelease(ctx, "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("ForceRelease on a store without Breaker: %v, want ErrUnsupported", err)
	}
	if _, err := c.ForceRelease(ctx, ""); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("ForceRelease of an empty key: %v, want ErrInvalid", err)
	}
	for _, err := range c.Watch(ctx, "", -time.Second) {
		if !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Watch with a negative interval: %v, want ErrInvalid", err)
		}
	}
}
