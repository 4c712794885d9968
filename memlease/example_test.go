package memlease_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/memlease"
)

// A Client over an in-memory store: acquire a key, use the fence, release.
func Example() {
	ctx := context.Background()
	c, err := lease.New(memlease.New(), lease.WithHolder("worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	l, err := c.TryAcquire(ctx, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired", l.Key(), "with fence", l.Fence())
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", errors.Is(l.Err(), lease.ErrReleased))
	// Output:
	// acquired reports/daily with fence 1
	// released: true
}

// Two clients share one store through handles, as two processes share a
// backend; the second learns who holds the key.
func Example_held() {
	ctx := context.Background()
	store := memlease.New()
	a, err := lease.New(store, lease.WithHolder("worker-a"))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := lease.New(store.Handle(), lease.WithHolder("worker-b"))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if _, err := a.TryAcquire(ctx, "billing"); err != nil {
		log.Fatal(err)
	}
	_, err = b.TryAcquire(ctx, "billing")
	var held *lease.HeldError
	if errors.As(err, &held) {
		fmt.Printf("%s is held by %s (fence %d)\n", held.Key, held.Holder, held.Fence)
	}
	fmt.Println("is ErrHeld:", errors.Is(err, lease.ErrHeld))
	// Output:
	// billing is held by worker-a (fence 1)
	// is ErrHeld: true
}

// Do holds the key while fn runs and releases it afterwards.
func Example_do() {
	ctx := context.Background()
	c, err := lease.New(memlease.New())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for range 2 {
		err := c.Do(ctx, "migrations", func(ctx context.Context, l *lease.Lease) error {
			fmt.Println("migrating under fence", l.Fence())
			return nil
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// migrating under fence 1
	// migrating under fence 2
}
