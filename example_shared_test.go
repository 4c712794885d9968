// Runnable examples of read-write leases, on the in-memory store.

package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/memlease"
)

// Readers hold a key together and share their read epoch's fence; a writer
// is refused while they hold and then gets a larger fence.
func ExampleClient_AcquireShared() {
	ctx := context.Background()
	store := memlease.New()
	readers, err := lease.New(store)
	if err != nil {
		log.Fatal(err)
	}
	defer readers.Close()
	writers, err := lease.New(store.Handle())
	if err != nil {
		log.Fatal(err)
	}
	defer writers.Close()

	r1, err := readers.AcquireShared(ctx, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	r2, err := readers.AcquireShared(ctx, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("readers share a fence:", r1.Fence() == r2.Fence())

	_, err = writers.TryAcquire(ctx, "catalog")
	fmt.Println("writer refused:", errors.Is(err, lease.ErrHeld))

	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := writers.Acquire(ctx, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("writer's fence is larger:", w.Fence() > r1.Fence())
	// Output:
	// readers share a fence: true
	// writer refused: true
	// writer's fence is larger: true
}

// A resource that keeps the largest fence it has seen, raised by reads as
// well as writes, refuses a reader whose epoch a writer has ended.
func ExampleClient_TryAcquireShared() {
	ctx := context.Background()
	store := memlease.New()
	c, err := lease.New(store)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	var seen uint64 // the resource's largest fence
	access := func(fence uint64) bool {
		if fence < seen {
			return false // stale: a newer holder has been here
		}
		seen = fence
		return true
	}

	r, err := c.TryAcquireShared(ctx, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("read:", access(r.Fence()))
	_ = r.Release(ctx) // (or: paused past its TTL)
	w, err := c.TryAcquire(ctx, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("write:", access(w.Fence()))
	fmt.Println("stale read:", access(r.Fence()))
	// Output:
	// read: true
	// write: true
	// stale read: false
}
