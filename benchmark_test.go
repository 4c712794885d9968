// Benchmarks of the Client's own work per operation, on the in-memory store
// (side-by-side figures against peers live in bench/).

package lease_test

import (
	"context"
	"testing"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/memlease"
)

// BenchmarkAcquireRelease: one Acquire and its Release of a free key; the
// allocations per operation are the Client's and memlease's.
func BenchmarkAcquireRelease(b *testing.B) {
	c, err := lease.New(memlease.New())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.Acquire(ctx, "k")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
