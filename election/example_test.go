// Runnable examples of package election, on the in-memory store.

package election_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/election"
	"github.com/leasekit/lease/memlease"
)

// exampleCandidate returns an Election for key over its own Client on a handle of
// store, as a separate process would have.
func exampleCandidate(store *memlease.Store, key, id string) (*election.Election, *lease.Client) {
	c, err := lease.New(store.Handle(), lease.WithTTL(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	e, err := election.New(c, key, election.WithIdentity(id))
	if err != nil {
		log.Fatal(err)
	}
	return e, c
}

// Two candidates: the first leads until it resigns, the second, waiting in
// Campaign, leads next with a larger fence.
func Example() {
	ctx := context.Background()
	store := memlease.New()
	a, ca := exampleCandidate(store, "scheduler", "node-a")
	defer ca.Close()
	b, cb := exampleCandidate(store, "scheduler", "node-b")
	defer cb.Close()

	la, err := a.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	leader, err := b.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("leader %s, fence %d\n", leader.Identity, leader.Fence)

	won := make(chan *lease.Lease)
	go func() {
		lb, err := b.Campaign(ctx) // waits while node-a leads
		if err != nil {
			log.Fatal(err)
		}
		won <- lb
	}()
	if err := a.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	lb := <-won
	fmt.Printf("node-a's term ended: %v\n", la.Err())
	fmt.Printf("node-b leads with fence %d\n", lb.Fence())
	// Output:
	// leader node-a, fence 1
	// node-a's term ended: lease: released
	// node-b leads with fence 2
}

// Run campaigns, runs the function while leading and campaigns again after
// it returns, until its ctx ends. leaderCtx ends when leadership is lost.
func ExampleElection_Run() {
	store := memlease.New()
	e, c := exampleCandidate(store, "compactor", "node-a")
	defer c.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	terms := 0
	err := e.Run(ctx, func(leaderCtx context.Context) {
		l := election.LeaseFrom(leaderCtx)
		terms++
		fmt.Printf("term %d: leading with fence %d\n", terms, l.Fence())
		// Work while leaderCtx is alive; pass l.Fence() with every write.
		if terms == 2 {
			cancel() // stop campaigning for good
		}
	})
	fmt.Println("Run:", err)
	// Output:
	// term 1: leading with fence 1
	// term 2: leading with fence 2
	// Run: context canceled
}

// Observe delivers the current state, then every leader (and vacancy) it
// sees, in fence order.
func ExampleElection_Observe() {
	store := memlease.New()
	watcher, cw := exampleCandidate(store, "primary", "watcher")
	defer cw.Close()
	a, ca := exampleCandidate(store, "primary", "node-a")
	defer ca.Close()
	b, cb := exampleCandidate(store, "primary", "node-b")
	defer cb.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := watcher.Observe(ctx)
	show := func() {
		l := <-changes
		if !l.Held {
			fmt.Println("no leader")
			return
		}
		fmt.Printf("leader %s (fence %d)\n", l.Identity, l.Fence)
	}
	show()
	if _, err := a.Campaign(ctx); err != nil {
		log.Fatal(err)
	}
	show()
	if err := a.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	show()
	if _, err := b.Campaign(ctx); err != nil {
		log.Fatal(err)
	}
	show()
	// Output:
	// no leader
	// leader node-a (fence 1)
	// no leader
	// leader node-b (fence 2)
}
