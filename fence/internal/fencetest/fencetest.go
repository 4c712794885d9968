// Package fencetest is the scenario every fenced-write helper passes against
// its real server: a paused holder's write refused after a newer holder's,
// equal and larger fences accepted, smaller ones refused with
// lease.ErrStaleFence, exact comparison above 2^53, concurrent writers.
package fencetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// Resource is one fresh fenced resource: Write writes value under fence
// through the helper under test; Read returns the value last written.
type Resource struct {
	Write func(ctx context.Context, fence uint64, value string) error
	Read  func(ctx context.Context) (string, error)
}

// Run runs the scenarios, each on a resource from newResource.
func Run(t *testing.T, newResource func(t *testing.T) Resource) {
	t.Run("PausedHolder", func(t *testing.T) { pausedHolder(t, newResource(t)) })
	t.Run("Fences", func(t *testing.T) { fences(t, newResource(t)) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, newResource(t)) })
}

// pausedHolder: a holder whose renewals stall loses its lease to the next
// holder; once that one has written, the paused holder's write is refused
// and the next holder's land, again under the same fence.
func pausedHolder(t *testing.T, r Resource) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := memlease.New()
	paused := leasetest.Faulty(mem)
	c1, c2 := client(t, paused, 200*time.Millisecond), client(t, mem, 30*time.Second)
	l1, err := c1.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	mustWrite(ctx, t, r, l1.Fence(), "first")
	paused.BlockRenewals(true)
	l2, err := c2.Acquire(ctx, "job")
	if err != nil || l2.Fence() <= l1.Fence() {
		t.Fatalf("Acquire by the next holder: %v, %v; want a fence above %d", l2, err, l1.Fence())
	}
	mustWrite(ctx, t, r, l2.Fence(), "second")
	mustRefuse(ctx, t, r, l1.Fence(), l2.Fence())
	mustWrite(ctx, t, r, l2.Fence(), "third")
	mustRead(ctx, t, r, "third")
}

// fences: equal and larger fences land, smaller ones are refused, compared
// exactly (2^53+1 and 2^53 are one float64).
func fences(t *testing.T, r Resource) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const big = 1<<53 + 1
	mustWrite(ctx, t, r, 5, "a")
	mustWrite(ctx, t, r, 5, "b")
	mustWrite(ctx, t, r, 7, "c")
	mustRefuse(ctx, t, r, 6, 7)
	mustRead(ctx, t, r, "c")
	mustWrite(ctx, t, r, big, "d")
	mustRefuse(ctx, t, r, big-1, big)
	mustRead(ctx, t, r, "d")
}

// concurrent: writers with fences 1..n in random order; each lands or is
// refused as stale, and the largest fence's value is the one left.
func concurrent(t *testing.T, r Resource) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 16
	var wg sync.WaitGroup
	for _, f := range rand.Perm(n) {
		wg.Add(1)
		go func(f uint64) {
			defer wg.Done()
			if err := r.Write(ctx, f, strconv.FormatUint(f, 10)); err != nil && !errors.Is(err, lease.ErrStaleFence) {
				t.Errorf("Write with fence %d: %v", f, err)
			}
		}(uint64(f + 1))
	}
	wg.Wait()
	mustRead(ctx, t, r, strconv.Itoa(n))
}

func client(t *testing.T, s driver.Store, ttl time.Duration) *lease.Client {
	t.Helper()
	c, err := lease.New(s, lease.WithTTL(ttl))
	if err != nil {
		t.Fatalf("lease.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func mustWrite(ctx context.Context, t *testing.T, r Resource, fence uint64, value string) {
	t.Helper()
	if err := r.Write(ctx, fence, value); err != nil {
		t.Fatalf("Write(%d, %q): %v", fence, value, err)
	}
}

// mustRefuse checks that a write with fence is refused as stale, naming the
// stored fence, and leaves the value alone.
func mustRefuse(ctx context.Context, t *testing.T, r Resource, fence, stored uint64) {
	t.Helper()
	before, err := r.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	err = r.Write(ctx, fence, "stale")
	var se *lease.StaleFenceError
	if !errors.As(err, &se) || !errors.Is(err, lease.ErrStaleFence) || !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Write with the stale fence %d: %v, want a *lease.StaleFenceError", fence, err)
	}
	if se.Fence != fence || se.Stored != stored || se.Resource == "" {
		t.Fatalf("Write with the stale fence %d: %+v, want Fence %d, Stored %d and the resource", fence, se, fence, stored)
	}
	mustRead(ctx, t, r, before)
}

func mustRead(ctx context.Context, t *testing.T, r Resource, want string) {
	t.Helper()
	if got, err := r.Read(ctx); err != nil || got != want {
		t.Fatalf("Read: %q, %v; want %q", got, err, want)
	}
}
