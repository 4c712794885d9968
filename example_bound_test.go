// Runnable examples of bounded, manual, reentrant and multi-key leases, on the in-memory store.

package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/memlease"
)

// A job that must never run longer than its limit: the Client gives the
// lease up then, even while it is healthy, and the job's context ends.
func ExampleWithMaxHold() {
	ctx := context.Background()
	c, err := lease.New(memlease.New())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	l, err := c.Acquire(ctx, "nightly-report", lease.WithTTL(time.Second), lease.WithMaxHold(50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	<-l.Context().Done() // the job would stop here
	var lost *lease.LostError
	fmt.Println("given up:", errors.As(l.Err(), &lost) && lost.Reason == lease.LossMaxHold)
	// Output:
	// given up: true
}

// A handler that cannot keep a goroutine running between calls renews its
// lease itself, before Remaining runs out; Extend changes the TTL.
func ExampleLease_Renew() {
	ctx := context.Background()
	c, err := lease.New(memlease.New())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	l, err := c.Acquire(ctx, "invoice-batch", lease.WithTTL(time.Minute), lease.WithManualRenew())
	if err != nil {
		log.Fatal(err)
	}
	// ... one invocation's work ...
	if err := l.Renew(ctx); err != nil {
		log.Fatal(err) // lost: stop working on the batch
	}
	if err := l.Extend(ctx, 5*time.Minute); err != nil {
		log.Fatal(err)
	}
	fmt.Println("TTL:", l.TTL())
	fmt.Println("held:", l.Err() == nil)
	// Output:
	// TTL: 5m0s
	// held: true
}

// Reentrancy is opt-in: a second acquisition of a held key returns the same
// lease, and the key is released with the last hold.
func ExampleWithReentrant() {
	ctx := context.Background()
	c, err := lease.New(memlease.New())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	outer, err := c.Acquire(ctx, "account:42", lease.WithReentrant(true))
	if err != nil {
		log.Fatal(err)
	}
	inner, err := c.Acquire(ctx, "account:42", lease.WithReentrant(true))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same lease, same fence:", inner == outer, inner.Fence() == outer.Fence())
	_ = inner.Release(ctx)
	fmt.Println("held after the inner release:", outer.Err() == nil)
	_ = outer.Release(ctx)
	fmt.Println("released after the outer one:", errors.Is(outer.Err(), lease.ErrReleased))
	// Output:
	// same lease, same fence: true true
	// held after the inner release: true
	// released after the outer one: true
}

// A transfer between two accounts holds both keys or neither, whatever
// order other transfers ask for them in; each key has its own fence.
func ExampleClient_AcquireAll() {
	ctx := context.Background()
	c, err := lease.New(memlease.New())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m, err := c.AcquireAll(ctx, "account:7", "account:3")
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range m.Leases() {
		fmt.Println(l.Key(), "fence", l.Fence())
	}
	// ... debit one, credit the other, passing m.Fence(key) with each write ...
	if err := m.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// account:3 fence 1
	// account:7 fence 1
}
