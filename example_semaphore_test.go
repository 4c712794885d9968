// Runnable example of semaphores (Client.AcquireSemaphore), on the in-memory store.

package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/memlease"
)

// A semaphore of 2: two holders at most, each holding one slot lease with
// its own fence; a released slot goes to the next holder with a larger fence.
func ExampleClient_AcquireSemaphore() {
	ctx := context.Background()
	c, err := lease.New(memlease.New(), lease.WithHolder("worker"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	first, err := c.AcquireSemaphore(ctx, "encoders", 2)
	if err != nil {
		log.Fatal(err)
	}
	second, err := c.AcquireSemaphore(ctx, "encoders", 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two holders on different slots:", first.Key() != second.Key())

	_, err = c.TrySemaphore(ctx, "encoders", 2)
	fmt.Println("third holder refused:", errors.Is(err, lease.ErrHeld))

	_, err = c.TrySemaphore(ctx, "encoders", 1)
	fmt.Println("different n refused:", errors.Is(err, lease.ErrInvalid))

	if err := first.Release(ctx); err != nil {
		log.Fatal(err)
	}
	third, err := c.AcquireSemaphore(ctx, "encoders", 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("third holder took the freed slot:", third.Key() == first.Key())
	fmt.Println("with a larger fence on that slot:", third.Fence() > first.Fence())
	// Output:
	// two holders on different slots: true
	// third holder refused: true
	// different n refused: true
	// third holder took the freed slot: true
	// with a larger fence on that slot: true
}
