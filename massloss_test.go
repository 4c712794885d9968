// A mass loss: leases lost together are released by one goroutine, in the
// store's batches.

package lease_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// gatedReleases is a batch-releasing store whose releases wait for gate,
// and which records the size of each ReleaseMany.
type gatedReleases struct {
	*leasetest.FaultyStore
	gate chan struct{}

	mu      sync.Mutex
	batches []int
	lone    int
}

func (g *gatedReleases) wait(ctx context.Context) error {
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedReleases) Release(ctx context.Context, r driver.Request) error {
	g.mu.Lock()
	g.lone++
	g.mu.Unlock()
	if err := g.wait(ctx); err != nil {
		return err
	}
	return g.FaultyStore.Release(ctx, r)
}

func (g *gatedReleases) ReleaseMany(ctx context.Context, rs []driver.Request) []error {
	g.mu.Lock()
	g.batches = append(g.batches, len(rs))
	g.mu.Unlock()
	errs := make([]error, len(rs))
	if err := g.wait(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i, r := range rs {
		errs[i] = g.FaultyStore.Release(ctx, r)
	}
	return errs
}

func TestMassLossReleasesInBatches(t *testing.T) {
	const n = 300
	clk := leasetest.NewFakeClock()
	mem := memlease.New(memlease.WithClock(clk))
	defer mem.Close()
	g := &gatedReleases{FaultyStore: leasetest.Faulty(mem), gate: make(chan struct{})}
	ttl := 10 * time.Second
	c, err := lease.New(g, lease.WithClock(clk), lease.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "mass-" + strconv.Itoa(i)
		if _, err := c.TryAcquire(ctx, keys[i]); err != nil {
			t.Fatal(err)
		}
	}
	base := runtime.NumGoroutine()
	g.BlockRenewals(true) // the store stalls: every lease reaches its local deadline
	defer g.BlockRenewals(false)
	for step := 0; step < 100 && len(c.Snapshot().Leases) > 0; step++ {
		clk.Advance(100 * time.Millisecond)
		time.Sleep(2 * time.Millisecond)
	}
	if held := len(c.Snapshot().Leases); held > 0 {
		t.Fatalf("%d of %d leases still held past their deadline", held, n)
	}
	// The releases of the lost tokens wait at the gate: one goroutine for
	// all of them, not one each.
	time.Sleep(50 * time.Millisecond)
	if extra := runtime.NumGoroutine() - base; extra > 20 {
		t.Errorf("%d more goroutines while the lost leases' releases wait, want a handful", extra)
	}
	close(g.gate)
	other, err := lease.New(mem.Handle(), lease.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// The store's TTL has not run out: a key is free only if released.
	deadline := time.Now().Add(10 * time.Second)
	for _, k := range keys {
		for {
			l, err := other.TryAcquire(ctx, k)
			if err == nil {
				_ = l.Release(ctx)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q still held after the lost leases' releases: %v", k, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	total := 0
	for _, b := range g.batches {
		total += b
	}
	if total != n || g.lone != 0 {
		t.Errorf("released in batches %v (%d tokens) and %d lone calls, want all %d in batches", g.batches, total, g.lone, n)
	}
}
