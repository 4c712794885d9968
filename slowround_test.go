// Renewal rounds slower than a renew interval: a batch keeps its leases.

package lease_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

// slowRounds is a batching store whose RenewMany takes delay (or until its
// context ends, as a store's call does).
type slowRounds struct {
	*memlease.Store
	delay   time.Duration
	ok, cut atomic.Int64
}

func (s *slowRounds) RenewMany(ctx context.Context, rs []driver.Request) []error {
	select {
	case <-time.After(s.delay):
		s.ok.Add(1)
		return s.Store.RenewMany(ctx, rs)
	case <-ctx.Done():
		s.cut.Add(1)
		errs := make([]error, len(rs))
		for i := range errs {
			errs[i] = ctx.Err()
		}
		return errs
	}
}

// TestSlowBatchRoundKeepsLeases: a RenewMany round that takes longer than a
// renew interval, but ends well before the leases' deadline, renews them
// (a round of 100,000 leases on a busy store can take that long); a cap at
// one interval failed every round, and the retries, with less time, failed
// too, until the leases were lost.
func TestSlowBatchRoundKeepsLeases(t *testing.T) {
	// TTL 6 s, interval 2 s, no drift margin to speak of. Each round takes
	// 2.2 s, and the next is due at once: sent 2.2 s after the last, it has
	// 3.8 s to the deadline and may run 2.8 s (the first may run 3 s).
	st := &slowRounds{Store: memlease.New(), delay: 2200 * time.Millisecond}
	defer st.Close()
	c, err := lease.New(st, lease.WithTTL(6*time.Second), lease.WithRenewInterval(2*time.Second), lease.WithDriftMargin(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ls []*lease.Lease
	for i := range 3 {
		l, err := c.TryAcquire(context.Background(), fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	deadline := time.Now().Add(30 * time.Second)
	for st.ok.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	for _, l := range ls {
		if err := l.Err(); err != nil {
			t.Fatalf("%s lost after %d slow rounds (%d cut short): %v", l.Key(), st.ok.Load(), st.cut.Load(), err)
		}
	}
	if st.ok.Load() < 3 {
		t.Fatalf("%d slow rounds completed in 30 s (%d cut short)", st.ok.Load(), st.cut.Load())
	}
	t.Logf("%d slow rounds completed, %d cut short", st.ok.Load(), st.cut.Load())
}

// sizedRounds is a batching store whose RenewMany takes perLease for each
// lease it renews (or until its context ends), and records each call's size.
type sizedRounds struct {
	*memlease.Store
	perLease atomic.Int64 // nanoseconds

	mu    sync.Mutex
	sizes []int // of the calls that renewed more than one lease
}

func (s *sizedRounds) RenewMany(ctx context.Context, rs []driver.Request) []error {
	if len(rs) > 1 {
		s.mu.Lock()
		s.sizes = append(s.sizes, len(rs))
		s.mu.Unlock()
	}
	select {
	case <-time.After(time.Duration(s.perLease.Load()) * time.Duration(len(rs))):
		return s.Store.RenewMany(ctx, rs)
	case <-ctx.Done():
		return slices.Repeat([]error{ctx.Err()}, len(rs))
	}
}

// waitCall waits up to 20 s for a call, after the first `after`, whose size
// ok accepts, and returns how many calls there were then.
func (s *sizedRounds) waitCall(t *testing.T, after int, what string, ok func(int) bool) int {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		sizes := s.sizes[after:]
		n := len(s.sizes)
		s.mu.Unlock()
		if slices.ContainsFunc(sizes, ok) {
			return n
		}
	}
	t.Fatalf("no %s in 20 s; call sizes %v", what, s.sizes[after:])
	return 0
}

// TestSlowingBatchRoundsSplit: as a store slows down, a round that takes more
// than half its time limit makes the next rounds go out in smaller calls,
// so that a round too slow for its limit as one call (here 1.1 times it)
// still renews every lease; once the store is fast again, rounds are one
// call again. As one call, every round failed whole and its retry, with
// less time, failed too: every lease was lost.
func TestSlowingBatchRoundsSplit(t *testing.T) {
	// TTL 3 s, interval 1 s: a round sent an interval after the last may
	// take 1.5 s (half an interval before the deadline).
	const n, limit = 4000, 1500 * time.Millisecond
	st := &sizedRounds{Store: memlease.New()}
	defer st.Close()
	c, err := lease.New(st, lease.WithTTL(3*time.Second), lease.WithRenewInterval(time.Second), lease.WithDriftMargin(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ls := make([]*lease.Lease, n)
	for i := range ls {
		if ls[i], err = c.TryAcquire(context.Background(), fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	whole := func(size int) bool { return size == n }
	calls := st.waitCall(t, 0, "round of one call", whole)
	slow := func(f float64) { st.perLease.Store(int64(f * float64(limit) / n)) }

	slow(0.8) // slow (1.2 intervals), within the limit
	calls = st.waitCall(t, calls, "round in smaller calls", func(size int) bool { return size < n })
	slow(1.1) // as one call, past the limit
	time.Sleep(4 * time.Second)
	for _, l := range ls {
		if err := l.Err(); err != nil {
			t.Fatalf("%s lost while one call would take 1.1 times the limit: %v", l.Key(), err)
		}
	}
	slow(0) // fast again
	st.waitCall(t, calls, "round of one call after the store sped up", whole)
	for _, l := range ls {
		if err := l.Err(); err != nil {
			t.Fatalf("%s lost: %v", l.Key(), err)
		}
	}
}
