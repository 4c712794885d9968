package memlease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

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

// An Acquire that gives up when its ctx ends says who held the key; a
// Client asking again for a key it holds is told at once that it is its own.
func Example_gaveUp() {
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
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = b.Acquire(wctx, "billing")
	var held *lease.HeldError
	if errors.As(err, &held) {
		fmt.Printf("gave up on %s, held by %s (fence %d)\n", held.Key, held.Holder, held.Fence)
	}
	fmt.Println("timed out:", errors.Is(err, context.DeadlineExceeded), "held:", errors.Is(err, lease.ErrHeld))

	_, err = a.TryAcquire(ctx, "billing")
	fmt.Println("held by itself:", errors.As(err, &held) && held.Self)
	// Output:
	// gave up on billing, held by worker-a (fence 1)
	// timed out: true held: true
	// held by itself: true
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
