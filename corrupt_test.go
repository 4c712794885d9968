package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// TestAcquireCorruptAtOnce: a store's ErrCorrupt ends Acquire at once, with
// one attempt: corrupt data does not heal by waiting.
func TestAcquireCorruptAtOnce(t *testing.T) {
	store := leasetest.Faulty(memlease.New())
	t.Cleanup(func() { _ = store.Close() })
	c, err := lease.New(store, lease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	store.FailAcquire(fmt.Errorf("memlease: %w: a value we never wrote", lease.ErrCorrupt))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if l, err := c.Acquire(ctx, "corrupt"); !errors.Is(err, lease.ErrCorrupt) {
		t.Fatalf("Acquire = %v, %v; want ErrCorrupt", l, err)
	}
	if n := store.Acquires(); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}
