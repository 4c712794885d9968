// Grant.FromQueue: a queued waiter granted on its entry's last refresh.

package lease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// queueGrants grants a token that was refused while queued with
// FromQueue set, as a store does that grants on the entry's last write.
type queueGrants struct {
	*memlease.Store
	mu      sync.Mutex
	refused map[string]bool
	renews  atomic.Int64
	gate    chan struct{} // Renew waits for it
}

func (q *queueGrants) wasRefused() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.refused) > 0
}

func (q *queueGrants) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	g, err := q.Store.Acquire(ctx, r)
	q.mu.Lock()
	defer q.mu.Unlock()
	if errors.Is(err, lease.ErrHeld) && r.Queue {
		q.refused[r.Token] = true
	}
	g.FromQueue = err == nil && q.refused[r.Token]
	return g, err
}

func (q *queueGrants) Renew(ctx context.Context, r driver.Request) error {
	q.renews.Add(1)
	<-q.gate
	return q.Store.Renew(ctx, r)
}

// TestFromQueueGrant: the Client counts such a lease's deadline and
// renewals from the start of the refused attempt, not from the grant.
func TestFromQueueGrant(t *testing.T) {
	clk := leasetest.NewFakeClock()
	st := &queueGrants{Store: memlease.New(memlease.WithClock(clk)), refused: map[string]bool{}, gate: make(chan struct{})}
	const ttl, drift = 9 * time.Second, time.Second
	opts := []lease.Option{lease.WithClock(clk), lease.WithTTL(ttl), lease.WithDriftMargin(drift)}
	holder, err := lease.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := lease.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	ctx := context.Background()
	held, err := holder.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := waiter.Acquire(ctx, "k")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	until(t, "the waiter refused and asleep", func() bool { return st.wasRefused() && clk.Timers() >= 2 })
	clk.Advance(2 * time.Second) // the refused attempt is now 2 s old
	before := st.renews.Load()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	defer l.Release(ctx)
	if rem, want := l.Remaining(), ttl-drift-2*time.Second; rem != want {
		t.Errorf("Remaining = %v right after the grant, want %v (counted from the refused attempt)", rem, want)
	}
	close(st.gate)
	clk.Advance(time.Second) // a renew interval (TTL/3) after the refused attempt
	until(t, "a renewal a renew interval after the refused attempt", func() bool { return st.renews.Load() > before })
	until(t, "Remaining back to TTL - drift after the renewal", func() bool { return l.Remaining() == ttl-drift })
}

// until waits (in real time, at most 10 s) for cond, or fails the test.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
