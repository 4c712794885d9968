// Tests of release announcements (Subscribe / Next / Close).

package redislease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/redislease"
)

type nextResult struct {
	key string
	err error
}

// next runs sub.Next(ctx) with a bound, failing the test if it blocks.
func next(t *testing.T, ctx context.Context, sub lease.Subscription, bound time.Duration) (string, error) {
	t.Helper()
	ch := make(chan nextResult, 1)
	go func() {
		k, err := sub.Next(ctx)
		ch <- nextResult{k, err}
	}()
	select {
	case r := <-ch:
		return r.key, r.err
	case <-time.After(bound):
		_ = sub.Close() // unblock the goroutine
		<-ch
		t.Fatalf("Next still blocked after %v", bound)
		return "", nil
	}
}

func subscribe(t *testing.T, s *redislease.Store) lease.Subscription {
	t.Helper()
	sub, err := s.Subscribe(testCtx(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

func TestSubscribeDeliversRelease(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	// The releasing store is another client on the same namespace.
	other := storeWithPrefix(t, newClient(t, c.Options().Addr), s.Prefix())
	ctx := testCtx(t, 20*time.Second)
	sub := subscribe(t, s)

	// Released right after Subscribe returned: must be delivered.
	for _, k := range []string{"first", "weird{key}%", "ключ"} {
		r := req(k, token(t), "h", 10*time.Second)
		if _, err := other.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := other.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, err := next(t, ctx, sub, 10*time.Second)
		if err != nil || got != k {
			t.Fatalf("Next = %q, %v; want %q", got, err, k)
		}
	}

	// A failed release (foreign token), a renewal, an acquisition and a
	// release in another namespace announce nothing: the next
	// announcement is the real release that follows them.
	held := req("held", token(t), "h", 10*time.Second)
	if _, err := other.Acquire(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := other.Release(ctx, req("held", token(t), "x", 0)); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("foreign Release = %v", err)
	}
	if err := other.Renew(ctx, held); err != nil {
		t.Fatal(err)
	}
	elsewhere := newStore(t, c)
	r := req("held", token(t), "h", 10*time.Second)
	if _, err := elsewhere.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := elsewhere.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := other.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	last := req("last", token(t), "h", 10*time.Second)
	if _, err := other.Acquire(ctx, last); err != nil {
		t.Fatal(err)
	}
	if err := other.Release(ctx, last); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"held", "last"} {
		got, err := next(t, ctx, sub, 10*time.Second)
		if err != nil || got != want {
			t.Fatalf("Next = %q, %v; want %q", got, err, want)
		}
	}
}

// Every subscriber of a namespace receives every release in it.
func TestSubscribeFanOut(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	s2 := storeWithPrefix(t, newClient(t, c.Options().Addr), s.Prefix())
	ctx := testCtx(t, 20*time.Second)
	subs := []lease.Subscription{subscribe(t, s), subscribe(t, s), subscribe(t, s2)}
	r := req("k", token(t), "h", 10*time.Second)
	if _, err := s.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	for i, sub := range subs {
		if got, err := next(t, ctx, sub, 10*time.Second); err != nil || got != "k" {
			t.Errorf("subscriber %d: Next = %q, %v", i, got, err)
		}
	}
}

// Next returns promptly when its context ends, and the subscription keeps
// working afterwards (no release is lost to the cancellation).
func TestNextContextEnds(t *testing.T) {
	s := newStore(t, sharedClient(t))
	ctx := testCtx(t, 30*time.Second)
	sub := subscribe(t, s)

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := next(t, cctx, sub, 5*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after cancel = %v, want context.Canceled", err)
	}
	t.Logf("Next returned %v after cancel was scheduled at 100ms", time.Since(start))

	dctx, dcancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer dcancel()
	if _, err := next(t, dctx, sub, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next after deadline = %v, want context.DeadlineExceeded", err)
	}

	if _, err := sub.Next(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a done context = %v, want context.Canceled", err)
	}

	r := req("after", token(t), "h", 10*time.Second)
	if _, err := s.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got, err := next(t, ctx, sub, 10*time.Second); err != nil || got != "after" {
		t.Fatalf("Next after cancellations = %q, %v; want \"after\"", got, err)
	}
}

func TestCloseUnblocksNext(t *testing.T) {
	s := newStore(t, sharedClient(t))
	ctx := testCtx(t, 20*time.Second)
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, func() { _ = sub.Close() })
	if _, err := next(t, ctx, sub, 5*time.Second); err == nil {
		t.Fatal("Next after Close returned no error")
	}
	if err := sub.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := sub.Next(ctx); err == nil {
		t.Error("Next on a closed subscription returned no error")
	}
}

func TestSubscribeContextDone(t *testing.T) {
	s := newStore(t, sharedClient(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if sub, err := s.Subscribe(ctx); !errors.Is(err, context.Canceled) {
		if sub != nil {
			_ = sub.Close()
		}
		t.Fatalf("Subscribe(cancelled) = %v, want context.Canceled", err)
	}
}
