package memlease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

func subscribe(t *testing.T, s *memlease.Store) driver.Subscription {
	t.Helper()
	sub, err := s.Subscribe(context.Background())
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// next calls sub.Next with a timeout.
func next(sub driver.Subscription, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	a, err := sub.Next(ctx)
	return a.Key, err
}

func TestSubscriptionDeliversReleasesOfEveryHandle(t *testing.T) {
	ctx := context.Background()
	s := memlease.New()
	other := s.Handle()
	mustAcquire(t, other, req("before", tokA, "", time.Minute))
	if err := other.Release(ctx, req("before", tokA, "", 0)); err != nil {
		t.Fatal(err)
	}
	sub1, sub2 := subscribe(t, s), subscribe(t, s)

	mustAcquire(t, other, req("k1", tokA, "", time.Minute))
	mustAcquire(t, other, req("k2", tokA, "", time.Minute))
	// Failed releases announce nothing.
	if err := other.Release(ctx, req("k1", tokB, "", 0)); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("foreign Release: %v", err)
	}
	for _, k := range []string{"k2", "k1"} {
		if err := other.Release(ctx, req(k, tokA, "", 0)); err != nil {
			t.Fatal(err)
		}
	}
	for i, sub := range []driver.Subscription{sub1, sub2} {
		for _, want := range []string{"k2", "k1"} {
			if got, err := next(sub, time.Second); err != nil || got != want {
				t.Errorf("sub%d Next = %q, %v; want %q (releases before Subscribe and failed releases are not announced)", i+1, got, err, want)
			}
		}
		if got, err := next(sub, 20*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("sub%d Next with nothing released = %q, %v; want context.DeadlineExceeded", i+1, got, err)
		}
	}
}

func TestNextWaitsForARelease(t *testing.T) {
	ctx := context.Background()
	s := memlease.New()
	sub := subscribe(t, s)
	mustAcquire(t, s, req("k", tokA, "", time.Minute))
	got := make(chan string, 1)
	go func() {
		k, err := next(sub, 10*time.Second)
		if err != nil {
			k = err.Error()
		}
		got <- k
	}()
	time.Sleep(20 * time.Millisecond)
	if err := s.Handle().Release(ctx, req("k", tokA, "", 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-got:
		if k != "k" {
			t.Errorf("Next = %q, want k", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after a release")
	}
}

func TestCloseUnblocksNext(t *testing.T) {
	for _, how := range []string{"subscription", "handle"} {
		t.Run(how, func(t *testing.T) {
			s := memlease.New()
			keep := s.Handle()
			sub := subscribe(t, s)
			errc := make(chan error, 1)
			go func() {
				_, err := sub.Next(context.Background())
				errc <- err
			}()
			time.Sleep(20 * time.Millisecond)
			if how == "subscription" {
				if err := sub.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			} else if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			select {
			case err := <-errc:
				if !errors.Is(err, memlease.ErrClosed) {
					t.Errorf("Next after Close: %v, want ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not unblock Next")
			}
			if err := sub.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			// A closed subscription gets nothing more, and releases through other
			// handles still work.
			mustAcquire(t, keep, req("k", tokA, "", time.Minute))
			if err := keep.Release(context.Background(), req("k", tokA, "", 0)); err != nil {
				t.Fatal(err)
			}
			if _, err := next(sub, time.Second); !errors.Is(err, memlease.ErrClosed) {
				t.Errorf("Next on a closed subscription: %v, want ErrClosed", err)
			}
		})
	}
}

func TestSubscriptionOverflow(t *testing.T) {
	ctx := context.Background()
	s := memlease.New()
	sub := subscribe(t, s)
	release := func(n int) {
		for i := range n {
			k := fmt.Sprintf("k%d", i)
			mustAcquire(t, s, req(k, tokA, "", time.Minute))
			if err := s.Release(ctx, req(k, tokA, "", 0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	release(memlease.MaxPending + 1)
	if _, err := next(sub, time.Second); !errors.Is(err, memlease.ErrOverflow) {
		t.Fatalf("Next after %d unread releases: %v, want ErrOverflow", memlease.MaxPending+1, err)
	}
	if k, err := next(sub, 20*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next after the overflow = %q, %v; want nothing queued", k, err)
	}
	release(1)
	if k, err := next(sub, time.Second); err != nil || k != "k0" {
		t.Errorf("Next after the overflow was reported = %q, %v; want k0", k, err)
	}
}
