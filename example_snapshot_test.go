// A runnable example of a Client's snapshot, on the in-memory store.

package lease_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/memlease"
)

// A process looks at what it holds and waits for, as a debug page does
// (package leasedebug serves it).
func ExampleClient_Snapshot() {
	ctx := context.Background()
	store := memlease.New()
	c, err := lease.New(store, lease.WithHolder("worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.TryAcquire(ctx, "job:invoice"); err != nil {
		log.Fatal(err)
	}
	other, err := lease.New(store.Handle(), lease.WithHolder("worker-2"))
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	if _, err := other.TryAcquire(ctx, "job:backup"); err != nil {
		log.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go c.Acquire(wctx, "job:backup", lease.WithHolder("worker-1/backup")) // waits for worker-2

	s := c.Snapshot()
	for len(s.Waiters) == 0 || s.Waiters[0].HeldBy == "" { // until the waiter was refused once
		time.Sleep(time.Millisecond)
		s = c.Snapshot()
	}
	for _, l := range s.Leases {
		fmt.Println("holds", l.Key, l.Kind, "as", l.Holder, "fence", l.Fence, "healthy:", l.Remaining > 0)
	}
	for _, w := range s.Waiters {
		fmt.Println("waits for", w.Key, "as", w.Holder, "held by", w.HeldBy)
	}
	for _, e := range s.Events {
		fmt.Println("event", e.Kind, e.Key)
	}
	// Output:
	// holds job:invoice exclusive as worker-1 fence 1 healthy: true
	// waits for job:backup as worker-1/backup held by worker-2
	// event acquired job:invoice
}
