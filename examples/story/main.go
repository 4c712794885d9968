// Command story tells the source article's story in one process, on the
// in-memory store: three workers compete for job:invoice-generation, the
// holder outlives its TTL thanks to the heartbeat, then it stalls (its
// renewals stop reaching the store, as in a GC pause or a frozen VM), loses
// the lease before anyone else can take it, and its late write, carrying its
// old fence, is rejected by a fenced register. It exits non-zero if any of
// that does not happen as described.
//
//	go run ./examples/story
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

const (
	key = "job:invoice-generation"
	ttl = 600 * time.Millisecond
)

var start = time.Now()

func say(format string, args ...any) {
	fmt.Printf("%6.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

// register is the protected resource: it keeps the largest fence it accepted
// and rejects writes that carry a smaller one.
type register struct {
	mu    sync.Mutex
	fence uint64
	value string
}

func (r *register) write(fence uint64, v string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fence < r.fence {
		return fmt.Errorf("stale fence %d < %d: write %q rejected", fence, r.fence, v)
	}
	r.fence, r.value = fence, v
	return nil
}

// stallable passes renewals through until stalled, then swallows them: the
// holder's process is alive but its heartbeat no longer reaches the store.
type stallable struct {
	driver.Store
	stalled atomic.Bool
}

func (s *stallable) Renew(ctx context.Context, r driver.Request) error {
	if s.stalled.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Store.Renew(ctx, r)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("PASS: every expectation of the story held")
}

func run() error {
	ctx := context.Background()
	mem := memlease.New()
	defer mem.Close()
	var reg register

	// Worker 1 gets a store whose heartbeat we can stall; 2 and 3 are normal.
	w1store := &stallable{Store: mem.Handle()}
	clients := make([]*lease.Client, 3)
	for i := range clients {
		var s driver.Store = mem.Handle()
		if i == 0 {
			s = w1store
		}
		c, err := lease.New(s, lease.WithTTL(ttl), lease.WithHolder(fmt.Sprintf("worker-%d", i+1)))
		if err != nil {
			return err
		}
		defer c.Close()
		clients[i] = c
	}

	say("three workers compete for %s (TTL %v, heartbeat every %v)", key, ttl, ttl/3)
	l1, err := clients[0].TryAcquire(ctx, key)
	if err != nil {
		return fmt.Errorf("worker-1 should get the free lease: %w", err)
	}
	say("worker-1 holds it, fence %d", l1.Fence())
	got := make(chan *lease.Lease, 2)
	for i := 1; i < 3; i++ {
		_, err := clients[i].TryAcquire(ctx, key)
		var held *lease.HeldError
		if !errors.As(err, &held) {
			return fmt.Errorf("worker-%d should see the lease held, got %v", i+1, err)
		}
		say("worker-%d: %v — waiting politely", i+1, err)
		go func() {
			l, err := clients[i].Acquire(ctx, key)
			if err != nil {
				say("worker-%d: %v", i+1, err)
				return
			}
			got <- l
		}()
	}

	if err := reg.write(l1.Fence(), "invoices by worker-1"); err != nil {
		return err
	}
	time.Sleep(3 * ttl)
	if l1.Err() != nil {
		return fmt.Errorf("the heartbeat should have kept worker-1's lease past 3×TTL: %w", l1.Err())
	}
	say("worker-1 still holds it after 3×TTL: the heartbeat renewed it")

	say("worker-1 stalls: its renewals stop reaching the store")
	w1store.stalled.Store(true)
	var next *lease.Lease
	select {
	case next = <-got:
	case <-time.After(5 * ttl):
		return errors.New("no waiter took over within 5×TTL")
	}
	select {
	case <-l1.Done():
	default:
		return errors.New("a waiter acquired while worker-1 had not yet been told it lost the lease")
	}
	say("worker-1 was told first: %v", l1.Err())
	say("%s took over with fence %d (> %d)", next.Holder(), next.Fence(), l1.Fence())
	if next.Fence() <= l1.Fence() {
		return errors.New("the new fence is not larger")
	}
	if err := reg.write(next.Fence(), "invoices by "+next.Holder()); err != nil {
		return err
	}

	say("worker-1 wakes up and, unaware, writes with its old fence %d", l1.Fence())
	err = reg.write(l1.Fence(), "late invoices by worker-1")
	if err == nil {
		return errors.New("the stale write was accepted")
	}
	say("the register refused it: %v", err)
	if err := next.Release(ctx); err != nil {
		return err
	}
	last := <-got
	say("%s released; %s got it next with fence %d", next.Holder(), last.Holder(), last.Fence())
	return last.Release(ctx)
}
