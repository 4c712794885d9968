// Tests of Client.WaitRelease, Holder and TTL on the in-memory store.
package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/memlease"
)

func TestWaitRelease(t *testing.T) {
	cs, _ := memClients(t, 2, lease.WithTTL(10*time.Second), lease.WithHolder("w1"))
	ctx := testCtx(t, 20*time.Second)
	if cs[0].Holder() != "w1" || cs[0].TTL() != 10*time.Second {
		t.Errorf("Holder(), TTL() = %q, %v; want %q, %v", cs[0].Holder(), cs[0].TTL(), "w1", 10*time.Second)
	}
	l, err := cs[0].TryAcquire(ctx, "watched")
	if err != nil {
		t.Fatal(err)
	}
	// No release: false after d.
	start := time.Now()
	got, err := cs[1].WaitRelease(ctx, "watched", 100*time.Millisecond)
	if err != nil || got {
		t.Errorf("WaitRelease without a release: %v, %v; want false, nil", got, err)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Errorf("WaitRelease returned after %v, want after 100ms", d)
	}
	// A release is announced long before d.
	done := make(chan error, 1)
	go func() {
		got, err := cs[1].WaitRelease(ctx, "watched", 10*time.Second)
		if err == nil && !got {
			err = errors.New("not announced")
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WaitRelease across a release: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("WaitRelease did not return within 3s of the release")
	}
	// ctx and Close end it.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := cs[1].WaitRelease(cctx, "watched", time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitRelease with a cancelled ctx: %v, want context.Canceled", err)
	}
	if _, err := cs[1].WaitRelease(ctx, "", time.Second); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("WaitRelease of an empty key: %v, want ErrInvalid", err)
	}
	go func() {
		_, err := cs[1].WaitRelease(ctx, "watched", 10*time.Second)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := cs[1].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, lease.ErrClosed) {
			t.Errorf("WaitRelease when the Client closed: %v, want ErrClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("WaitRelease did not return within 3s of Close")
	}
}

// TestWaitReleaseWithoutNotifier: over a store that cannot announce, it
// sleeps for d.
func TestWaitReleaseWithoutNotifier(t *testing.T) {
	s := memlease.New()
	defer s.Close()
	c, err := lease.New(memlease.Plain(s))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	got, err := c.WaitRelease(context.Background(), "k", 50*time.Millisecond)
	if err != nil || got {
		t.Errorf("WaitRelease: %v, %v; want false, nil", got, err)
	}
	if d := time.Since(start); d < 45*time.Millisecond {
		t.Errorf("WaitRelease returned after %v, want after 50ms", d)
	}
}
