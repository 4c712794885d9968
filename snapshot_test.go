// Client.Snapshot on the in-memory store and a fake clock: held leases,
// waiters and the ring of recent events.

package lease_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// snapshotUntil polls c.Snapshot (in real time) until ok accepts it.
func snapshotUntil(t *testing.T, c *lease.Client, ok func(lease.Snapshot) bool) lease.Snapshot {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := c.Snapshot()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("no such snapshot within 5s; the last: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
}

func listed(t *testing.T, c *lease.Client, key string) lease.KeyInfo {
	t.Helper()
	for k, err := range c.List(context.Background(), key) {
		if err != nil {
			t.Fatal(err)
		}
		if k.Key == key {
			return k
		}
	}
	t.Fatalf("List does not show %q", key)
	return lease.KeyInfo{}
}

func TestSnapshotLeaseAndWaiter(t *testing.T) {
	f := newFixture(t)
	other := f.other(t)
	ctx := context.Background()
	start := f.clk.Now()
	l, err := f.c.TryAcquire(ctx, "job:invoice", lease.WithTTL(9*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(3 * time.Second) // the first renewal
	f.rec.take(t, lease.EventRenewed)

	got := make(chan error, 1)
	go func() {
		l2, err := other.Acquire(ctx, "job:invoice")
		if err == nil {
			err = l2.Release(ctx)
		}
		got <- err
	}()
	w := snapshotUntil(t, other, func(s lease.Snapshot) bool { return len(s.Waiters) == 1 && s.Waiters[0].HeldBy != "" }).Waiters[0]
	info := listed(t, other, "job:invoice")
	want := lease.WaitState{Key: "job:invoice", Kind: lease.KindExclusive, ID: info.Waiters[0].ID, Holder: "other:2",
		Since: start.Add(3 * time.Second), HeldBy: "test:1"}
	if w != want {
		t.Errorf("waiter\n got %+v\nwant %+v", w, want)
	}

	f.clk.Advance(time.Second)
	s := f.c.Snapshot()
	if len(s.Leases) != 1 || len(s.Waiters) != 0 || s.Holder != "test:1" || s.Closed || !s.Time.Equal(start.Add(4*time.Second)) {
		t.Fatalf("snapshot %+v", s)
	}
	wantLease := lease.LeaseState{Key: "job:invoice", Kind: lease.KindExclusive, ID: info.Holders[0].ID, Holder: "test:1",
		Fence: l.Fence(), Acquired: start, Held: 4 * time.Second, LastRenew: start.Add(3 * time.Second),
		Remaining: 9*time.Second - 901*time.Millisecond - time.Second}
	if s.Leases[0] != wantLease {
		t.Errorf("lease\n got %+v\nwant %+v", s.Leases[0], wantLease)
	}
	if strings.Contains(s.Leases[0].ID, l.Token()) || len(s.Leases[0].ID) != 8 {
		t.Errorf("lease ID %q: want an 8-digit digest of the token", s.Leases[0].ID)
	}

	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	s = f.c.Snapshot()
	if len(s.Leases) != 0 || kinds(s.Events) != "acquired,released" {
		t.Errorf("after the release: %d leases, events %s (renewals are left out)", len(s.Leases), kinds(s.Events))
	}
	if s = other.Snapshot(); len(s.Waiters) != 0 || kinds(s.Events) != "acquired,released" {
		t.Errorf("the waiter's client: %d waiters, events %s", len(s.Waiters), kinds(s.Events))
	}
}

func kinds(evs []lease.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Kind.String())
	}
	return strings.Join(s, ",")
}

func TestSnapshotKinds(t *testing.T) {
	f := newFixture(t)
	other := f.other(t)
	ctx := context.Background()
	if _, err := f.c.TryAcquireShared(ctx, "read"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.TrySemaphore(ctx, "sem", 1); err != nil {
		t.Fatal(err)
	}
	s := f.c.Snapshot()
	if len(s.Leases) != 2 || s.Leases[0].Key != "read" || s.Leases[0].Kind != lease.KindShared ||
		s.Leases[1].Key != lease.SlotKey("sem", 0) || s.Leases[1].Kind != lease.KindSemaphore || s.Leases[1].Holder != "test:1" {
		t.Fatalf("leases %+v", s.Leases)
	}

	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = other.AcquireSemaphore(wctx, "sem", 1)
	}()
	w := snapshotUntil(t, other, func(s lease.Snapshot) bool { return len(s.Waiters) == 1 }).Waiters[0]
	if w.Key != "sem" || w.Kind != lease.KindSemaphore || w.ID != "" {
		t.Errorf("semaphore waiter %+v: want key sem, kind semaphore, no ID (it does not queue)", w)
	}
	cancel()
	<-done
	if s := other.Snapshot(); len(s.Waiters) != 0 || kinds(s.Events) != "acquire_failed" {
		t.Errorf("after giving up: waiters %+v, events %s", s.Waiters, kinds(s.Events))
	}
}

func TestSnapshotKeepsTheLastEvents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const cycles = 150 // two events each
	for range cycles {
		l, err := f.c.TryAcquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	evs := f.c.Snapshot().Events
	if len(evs) != 100 {
		t.Fatalf("%d events, want the last 100", len(evs))
	}
	for i, e := range evs {
		wantID, wantKind := uint64(cycles-50+i/2+1), lease.EventAcquired
		if i%2 == 1 {
			wantKind = lease.EventReleased
		}
		if e.ID != wantID || e.Kind != wantKind || e.Context != nil {
			t.Fatalf("event %d: %v of lease %d (context %v), want %v of lease %d, no context", i, e.Kind, e.ID, e.Context, wantKind, wantID)
		}
	}
}
