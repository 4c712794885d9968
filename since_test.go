package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// sinceStore is a memlease store whose grants to requests with RecordLater
// say the TTL started `since` before the call, and which records renewals.
type sinceStore struct {
	*memlease.Store
	since      time.Duration
	unrecorded bool
	renewed    chan string
}

func (s *sinceStore) Acquire(ctx context.Context, r lease.Request) (lease.Grant, error) {
	g, err := s.Store.Acquire(ctx, r)
	if err == nil && r.RecordLater {
		g.Since, g.Unrecorded = s.since, s.unrecorded
	}
	return g, err
}

func (s *sinceStore) Renew(ctx context.Context, r lease.Request) error {
	s.renewed <- r.Token
	return s.Store.Renew(ctx, r)
}

func (s *sinceStore) RenewMany(ctx context.Context, rs []lease.Request) []error {
	errs := make([]error, len(rs))
	for i, r := range rs {
		errs[i] = s.Renew(ctx, r)
	}
	return errs
}

// TestGrantSince: a grant with Grant.Since counts the local deadline and the
// first renewal from Since before the attempt; Grant.Unrecorded makes the
// Client renew at once (without the clock moving); only queued requests
// (Acquire in FIFO mode) carry RecordLater.
func TestGrantSince(t *testing.T) {
	clk := leasetest.NewFakeClock()
	mem := memlease.New(memlease.WithClock(clk))
	defer mem.Close()
	st := &sinceStore{Store: mem, since: 2 * time.Second, renewed: make(chan string, 16)}
	c, err := lease.New(st, lease.WithClock(clk), lease.WithTTL(9*time.Second)) // renew interval 3s
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	renewedSoon := func(l *lease.Lease, within time.Duration) bool {
		t.Helper()
		select {
		case tok := <-st.renewed:
			if tok != l.Token() {
				t.Errorf("renewed token %s, want the lease's", tok)
			}
			return true
		case <-time.After(within):
			return false
		}
	}

	// Since alone: the TTL started 2s before, the first renewal is due 1s
	// after the grant (2s + 1s = the 3s renew interval).
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if got, want := l.Remaining(), 7*time.Second; got > want {
		t.Errorf("Remaining = %v right after the grant, want at most %v (TTL 9s, started 2s before)", got, want)
	}
	if renewedSoon(l, 100*time.Millisecond) {
		t.Error("a grant with Since (recorded) was renewed before its renew interval")
	}
	deadline := time.Now().Add(5 * time.Second)
	for clk.Timers() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // the heartbeat has armed its timer
	}
	clk.Advance(1100 * time.Millisecond)
	if !renewedSoon(l, 5*time.Second) {
		t.Fatal("a grant with Since was not renewed a renew interval after its TTL started")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	// Unrecorded: renewed at once.
	st.unrecorded = true
	l, err = c.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if !renewedSoon(l, 5*time.Second) {
		t.Fatal("an unrecorded grant was not renewed at once")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	// TryAcquire does not queue: no RecordLater, the TTL starts at the call.
	l, err = c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if got := l.Remaining(); got < 8*time.Second {
		t.Errorf("TryAcquire's Remaining = %v, want the whole TTL (no Since without RecordLater)", got)
	}
	if renewedSoon(l, 100*time.Millisecond) {
		t.Error("a grant without Since was renewed before its renew interval")
	}
	_ = l.Release(ctx)
}
