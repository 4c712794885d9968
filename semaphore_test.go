// Tests of semaphores (AcquireSemaphore, TrySemaphore) on the in-memory
// store: input checks, mixed n, the limit under a race, a crashed holder's
// slot, waiting.
package lease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

// memClients returns k clients, each over its own handle of one in-memory
// store (like k processes), closed at cleanup.
func memClients(t *testing.T, k int, opts ...lease.Option) ([]*lease.Client, *memlease.Store) {
	t.Helper()
	root := memlease.New()
	t.Cleanup(func() { _ = root.Close() })
	cs := make([]*lease.Client, k)
	for i := range cs {
		h := root.Handle()
		c, err := lease.New(h, opts...)
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			_ = h.Close()
		})
	}
	return cs, root
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestSemaphoreRejectsBadInput(t *testing.T) {
	cs, _ := memClients(t, 1)
	c, ctx := cs[0], testCtx(t, 10*time.Second)
	for _, n := range []int{0, -1} {
		_, err := c.TrySemaphore(ctx, "sem", n)
		var ie *lease.InvalidError
		if !errors.As(err, &ie) || ie.Field != "semaphore n" {
			t.Errorf("TrySemaphore with n=%d: %v, want an *InvalidError for \"semaphore n\"", n, err)
		}
		if _, err := c.AcquireSemaphore(ctx, "sem", n); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("AcquireSemaphore with n=%d: %v, want ErrInvalid", n, err)
		}
	}
	// The key itself fits, its slot keys do not.
	long := strings.Repeat("k", lease.MaxKeyLen-len("#sem1")+1)
	if _, err := c.TrySemaphore(ctx, long, 1); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("TrySemaphore whose slot keys are too long: %v, want ErrInvalid", err)
	}
	if _, err := c.TrySemaphore(ctx, long[:len(long)-1], 1); err != nil {
		t.Errorf("TrySemaphore whose slot keys just fit: %v", err)
	}
	if _, err := c.TrySemaphore(ctx, "", 1); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("TrySemaphore with an empty key: %v, want ErrInvalid", err)
	}
	// The holder fits, but not with the " [sem n=1]" the store keeps after it.
	holder := lease.WithHolder(strings.Repeat("h", lease.MaxHolderLen))
	if _, err := c.TrySemaphore(ctx, "sem", 1, holder); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("TrySemaphore whose holder and tag exceed MaxHolderLen: %v, want ErrInvalid", err)
	}
}

func TestSemaphoreSlotsAndHolders(t *testing.T) {
	cs, root := memClients(t, 3, lease.WithHolder("worker"))
	ctx := testCtx(t, 10*time.Second)
	l1, err := cs[0].TrySemaphore(ctx, "pool", 2)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := cs[1].TrySemaphore(ctx, "pool", 2)
	if err != nil {
		t.Fatal(err)
	}
	slots := map[string]bool{lease.SlotKey("pool", 0): true, lease.SlotKey("pool", 1): true}
	if !slots[l1.Key()] || !slots[l2.Key()] || l1.Key() == l2.Key() {
		t.Errorf("slot keys %q and %q, want the two distinct keys of %v", l1.Key(), l2.Key(), slots)
	}
	if l1.Holder() != "worker" {
		t.Errorf("Holder() = %q, want %q without the annotation", l1.Holder(), "worker")
	}
	info, err := root.Inspect(ctx, l1.Key())
	if err != nil || info.Holder != "worker [sem n=2]" || info.Fence != l1.Fence() {
		t.Errorf("Inspect(%q) = %+v, %v; want holder %q and fence %d", l1.Key(), info, err, "worker [sem n=2]", l1.Fence())
	}
	_, err = cs[2].TrySemaphore(ctx, "pool", 2)
	var he *lease.HeldError
	if !errors.As(err, &he) || he.Key != "pool" || he.Remaining <= 0 {
		t.Errorf("TrySemaphore with every slot held: %v, want a *HeldError for %q with the earliest remaining TTL", err, "pool")
	}
	// A slot's fences increase across its holders.
	key := l1.Key()
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l3, err := cs[2].TrySemaphore(ctx, "pool", 2)
	if err != nil {
		t.Fatal(err)
	}
	if l3.Key() != key || l3.Fence() <= l1.Fence() {
		t.Errorf("after a release: slot %q fence %d, want slot %q with a fence > %d", l3.Key(), l3.Fence(), key, l1.Fence())
	}
}

func TestSemaphoreMixedN(t *testing.T) {
	cs, _ := memClients(t, 3)
	ctx := testCtx(t, 10*time.Second)
	for i := range 2 {
		if _, err := cs[i].TrySemaphore(ctx, "mixed", 2); err != nil {
			t.Fatal(err)
		}
	}
	// A smaller n sees a holder beyond its range: always detected, also
	// by the waiting variant, which must not wait.
	for _, acquire := range []func(context.Context, string, int, ...lease.AcquireOption) (*lease.Lease, error){
		cs[2].TrySemaphore, cs[2].AcquireSemaphore,
	} {
		_, err := acquire(ctx, "mixed", 1)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "n=1") || !strings.Contains(err.Error(), "n=2") {
			t.Errorf("n=1 on a semaphore held with n=2: %v; want ErrInvalid naming both", err)
		}
	}
	// A larger n is detected when it meets a held slot before a free one
	// (best effort: the slots are tried from a random one).
	detected := 0
	for range 30 {
		l, err := cs[2].TrySemaphore(ctx, "mixed", 3)
		switch {
		case errors.Is(err, lease.ErrInvalid):
			detected++
			if !strings.Contains(err.Error(), "n=3") || !strings.Contains(err.Error(), "n=2") {
				t.Errorf("error does not name both n: %v", err)
			}
		case err == nil:
			if l.Key() != lease.SlotKey("mixed", 2) {
				t.Errorf("n=3 acquired slot %q, want the only free one", l.Key())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("n=3 on a semaphore held with n=2: %v", err)
		}
	}
	if detected == 0 {
		t.Errorf("n=3 on a semaphore held with n=2 was never detected in 30 tries")
	}
	t.Logf("a larger n was detected in %d of 30 tries", detected)
}

// TestSemaphoreRaceNeverExceedsN: goroutines of several clients loop over
// AcquireSemaphore; never more than n hold at once, and n do at some point.
func TestSemaphoreRaceNeverExceedsN(t *testing.T) {
	const n, clients, perClient, rounds = 3, 4, 8, 5
	cs, _ := memClients(t, clients, lease.WithTTL(time.Second))
	ctx := testCtx(t, 60*time.Second)
	var holding, peak, total atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, c := range cs {
		for range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range rounds {
					l, err := c.AcquireSemaphore(ctx, "race", n)
					if err != nil {
						t.Errorf("AcquireSemaphore: %v", err)
						return
					}
					now := holding.Add(1)
					for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
					}
					total.Add(1)
					time.Sleep(2 * time.Millisecond)
					holding.Add(-1)
					if err := l.Release(ctx); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if p := peak.Load(); p != n {
		t.Errorf("peak of %d concurrent holders, want %d", p, n)
	}
	if got := total.Load(); got != clients*perClient*rounds {
		t.Errorf("%d acquisitions, want %d", got, clients*perClient*rounds)
	}
}

// TestSemaphoreCrashedHolderFreesAfterTTL: a holder that stops renewing and
// never releases (a crashed process) keeps its slot for its TTL only.
func TestSemaphoreCrashedHolderFreesAfterTTL(t *testing.T) {
	const ttl = 300 * time.Millisecond
	cs, root := memClients(t, 2, lease.WithTTL(ttl))
	ctx := testCtx(t, 10*time.Second)
	live, err := cs[0].TrySemaphore(ctx, "crash", 2, lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The crashed holder: a slot taken at the store level, never renewed.
	free := lease.SlotKey("crash", 0)
	if live.Key() == free {
		free = lease.SlotKey("crash", 1)
	}
	crashed := time.Now()
	g, err := root.Acquire(ctx, driver.Request{Key: free, Token: strings.Repeat("d", 32), Holder: "dead [sem n=2]", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	l, err := cs[1].AcquireSemaphore(ctx, "crash", 2)
	if err != nil {
		t.Fatalf("AcquireSemaphore: %v", err)
	}
	took := time.Since(crashed)
	t.Logf("acquired the crashed holder's slot %v after its acquisition (TTL %v)", took.Round(time.Millisecond), ttl)
	if took < ttl*9/10 || took > ttl+2*time.Second {
		t.Errorf("acquired %v after the crashed holder's acquisition, want about its TTL %v", took, ttl)
	}
	if l.Key() != free || l.Fence() <= g.Fence {
		t.Errorf("got slot %q fence %d, want the crashed holder's %q with a fence > %d", l.Key(), l.Fence(), free, g.Fence)
	}
}

// TestSemaphoreWaitWakesOnRelease: a waiter registered for every slot wakes
// on the release of any of them, long before the holders' TTL.
func TestSemaphoreWaitWakesOnRelease(t *testing.T) {
	cs, _ := memClients(t, 3, lease.WithTTL(10*time.Second))
	ctx := testCtx(t, 20*time.Second)
	held := make([]*lease.Lease, 2)
	for i := range held {
		l, err := cs[i].TrySemaphore(ctx, "wake", 2)
		if err != nil {
			t.Fatal(err)
		}
		held[i] = l
	}
	for _, which := range []int{1, 0} {
		type result struct {
			l   *lease.Lease
			err error
		}
		ch := make(chan result, 1)
		go func() {
			l, err := cs[2].AcquireSemaphore(ctx, "wake", 2)
			ch <- result{l, err}
		}()
		time.Sleep(50 * time.Millisecond)
		released := time.Now()
		if err := held[which].Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatalf("AcquireSemaphore: %v", r.err)
			}
			if r.l.Key() != held[which].Key() {
				t.Errorf("waiter got %q, want the released %q", r.l.Key(), held[which].Key())
			}
			t.Logf("woke %v after the release of %q", time.Since(released).Round(time.Millisecond), held[which].Key())
			held[which] = r.l
		case <-time.After(3 * time.Second):
			t.Fatalf("the waiter did not wake within 3s of the release of %q (TTL 10s)", held[which].Key())
		}
	}
}

// TestSemaphoreWaitEndsOnClose: a waiting AcquireSemaphore (and Acquire)
// returns ErrClosed promptly when its Client is closed.
func TestSemaphoreWaitEndsOnClose(t *testing.T) {
	cs, _ := memClients(t, 2, lease.WithTTL(10*time.Second))
	ctx := testCtx(t, 20*time.Second)
	if _, err := cs[0].TrySemaphore(ctx, "closing", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := cs[0].TryAcquire(ctx, "closing-plain"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() {
		_, err := cs[1].AcquireSemaphore(ctx, "closing", 1)
		errs <- err
	}()
	go func() {
		_, err := cs[1].Acquire(ctx, "closing-plain")
		errs <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := cs[1].Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, lease.ErrClosed) {
				t.Errorf("waiting acquisition when the Client closed: %v, want ErrClosed", err)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("a waiting acquisition did not return within 3s of Close (TTL 10s)")
		}
	}
}

// TestSemaphoreIgnoresReentrant: a Client whose default is WithReentrant
// still takes a different slot for each acquisition.
func TestSemaphoreIgnoresReentrant(t *testing.T) {
	cs, _ := memClients(t, 1, lease.WithReentrant(true))
	c, ctx := cs[0], testCtx(t, 10*time.Second)
	a, err := c.TrySemaphore(ctx, "sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.TrySemaphore(ctx, "sem", 2)
	if err != nil || a == b || a.Key() == b.Key() {
		t.Fatalf("second slot: %v, %v; want another slot than %s", b, err, a.Key())
	}
	if _, err := c.TrySemaphore(ctx, "sem", 2); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("third acquisition of 2 slots = %v, want ErrHeld", err)
	}
}
