//go:build linux

// Release announcements: a Subscription delivers releases made through any
// store of the directory (long keys included), not acquisitions or renewals,
// and honours ctx and Close.

package filelease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/filelease"
)

// nextWithin calls Next with a timeout of d.
func nextWithin(t *testing.T, sub interface {
	Next(context.Context) (string, error)
}, d time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return sub.Next(ctx)
}

func TestSubscriptionDeliversReleases(t *testing.T) {
	s := newStore(t, "")
	other := newStore(t, s.Dir())
	ctx := testCtx(t, 20*time.Second)
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })

	long := strings.Repeat("long/key/", filelease.MaxKeyLen/9)
	for _, key := range []string{"plain-" + randHex(4), "../odd key/" + randHex(4), long} {
		r := req(key, "a", time.Minute)
		mustAcquire(t, other, r)
		if err := other.Renew(ctx, r); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		mustAcquire(t, other, r) // idempotent re-acquire
		// Neither acquisitions nor renewals are announced.
		if k, err := nextWithin(t, sub, 150*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next after acquire and renew of %q: %q, %v; want nothing (DeadlineExceeded)", key, k, err)
		}
		released := time.Now()
		if err := other.Release(ctx, r); err != nil {
			t.Fatalf("Release: %v", err)
		}
		k, err := nextWithin(t, sub, 5*time.Second)
		if err != nil || k != key {
			t.Fatalf("Next after Release(%q) = %q, %v", key, k, err)
		}
		t.Logf("release of a %d-byte key announced after %v", len(key), time.Since(released).Round(time.Microsecond))
	}
}

func TestSubscriptionCtxAndClose(t *testing.T) {
	s := newStore(t, "")
	ctx := testCtx(t, 20*time.Second)
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sub.Next(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Next with a cancelled ctx: %v", err)
	}
	start := time.Now()
	if _, err := nextWithin(t, sub, 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next with a 100ms timeout: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Next with a 100ms timeout took %v", d)
	}
	// A later Next still works after an earlier ctx ended.
	r := req("after-timeout", "a", time.Minute)
	mustAcquire(t, s, r)
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if k, err := nextWithin(t, sub, 5*time.Second); err != nil || k != r.Key {
		t.Errorf("Next after a timed-out Next: %q, %v", k, err)
	}
	// Close unblocks a waiting Next.
	done := make(chan error, 1)
	go func() {
		_, err := sub.Next(ctx)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, filelease.ErrClosed) {
			t.Errorf("Next unblocked by Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Next")
	}
	if err := sub.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
