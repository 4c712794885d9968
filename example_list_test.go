// Runnable examples of listing keys and breaking a lease, on the in-memory
// store.

package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"strings"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/memlease"
)

// An operator lists the jobs' keys, sorted for display.
func ExampleClient_List() {
	ctx := context.Background()
	c, err := lease.New(memlease.New(), lease.WithHolder("worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, key := range []string{"job:invoice", "job:backup", "other"} {
		if _, err := c.TryAcquire(ctx, key); err != nil {
			log.Fatal(err)
		}
	}
	var keys []lease.KeyInfo
	for k, err := range c.List(ctx, "job:") {
		if err != nil {
			log.Fatal(err)
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b lease.KeyInfo) int { return strings.Compare(a.Key, b.Key) })
	for _, k := range keys {
		fmt.Println(k.Key, k.Kind, k.Holders[0].Holder, "fence", k.Fence())
	}
	// Output:
	// job:backup exclusive worker-1 fence 1
	// job:invoice exclusive worker-1 fence 1
}

// An operator breaks a stuck holder's lease: the next holder's fence is
// larger, and the stuck holder learns at its next renewal that it was broken.
func ExampleClient_ForceRelease() {
	ctx := context.Background()
	store := memlease.New()
	stuck, err := lease.New(store, lease.WithHolder("stuck"))
	if err != nil {
		log.Fatal(err)
	}
	defer stuck.Close()
	operator, err := lease.New(store.Handle(), lease.WithHolder("operator"))
	if err != nil {
		log.Fatal(err)
	}
	defer operator.Close()

	l, err := stuck.TryAcquire(ctx, "job:invoice", lease.WithTTL(lease.MinTTL*30))
	if err != nil {
		log.Fatal(err)
	}
	evicted, err := operator.ForceRelease(ctx, "job:invoice")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("evicted", evicted.Holders[0].Holder, "with fence", evicted.Fence())
	next, err := operator.TryAcquire(ctx, "job:invoice")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next fence", next.Fence())
	<-l.Done() // at the stuck holder's next renewal
	fmt.Println("stuck holder broken:", errors.Is(l.Err(), lease.ErrBroken))
	// Output:
	// evicted stuck with fence 1
	// next fence 2
	// stuck holder broken: true
}
