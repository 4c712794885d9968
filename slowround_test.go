// Renewal rounds slower than a renew interval: a batch keeps its leases.

package lease_test

import (
	"context"
	"fmt"
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
