// Readers and writers of several clients and stores on one key, at once.

package etcdlease_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestSharedMixed: clients on their own stores take one key as readers and
// writers by turns for a while; no writer ever overlaps another holder,
// every writer's fence is above every fence granted before it, and readers
// that hold together share one fence.
func TestSharedMixed(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	cli := newCli(t, endpoints(t))
	prefix := testPrefix()
	var (
		mu      sync.Mutex
		writing bool
		readers int
		epoch   uint64 // the fence of the readers holding now
		last    uint64 // the largest fence granted so far
		written uint64 // the largest writer's fence
		grants  [2]int // readers' and writers' grants
		joined  int    // readers' grants beside other readers
	)
	// check records the grant of l, or says what is wrong with it. The holds
	// counted are those not yet being released, so a reader may join an
	// epoch whose last counted reader is still releasing.
	check := func(l *lease.Lease, shared bool) string {
		mu.Lock()
		defer mu.Unlock()
		switch f := l.Fence(); {
		case writing:
			return fmt.Sprintf("granted (shared %v, fence %d) while a writer holds", shared, f)
		case !shared && readers > 0:
			return fmt.Sprintf("writer granted (fence %d) while %d readers hold", f, readers)
		case !shared && f <= last:
			return fmt.Sprintf("writer's fence %d not above %d", f, last)
		case shared && readers > 0 && f != epoch:
			return fmt.Sprintf("reader joined with fence %d, the readers hold %d", f, epoch)
		case shared && (f <= written || f < last):
			return fmt.Sprintf("reader's fence %d below %d or not above the writers' %d", f, last, written)
		case shared:
			joined += min(readers, 1)
			readers, epoch = readers+1, f
			grants[0]++
		default:
			writing, written = true, f
			grants[1]++
		}
		last = max(last, l.Fence())
		return ""
	}
	var wg sync.WaitGroup
	stop := time.Now().Add(4 * time.Second)
	for i := range 6 {
		c, err := lease.New(newStore(t, cli, prefix), lease.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(stop); n++ {
				shared := (i+n)%3 != 0
				get := c.Acquire
				if shared {
					get = c.AcquireShared
				}
				l, err := get(ctx, "k")
				if err != nil {
					t.Errorf("acquire (shared %v): %v", shared, err)
					return
				}
				msg := check(l, shared)
				if msg == "" {
					time.Sleep(time.Duration(1+n%3) * time.Millisecond)
					mu.Lock()
					if shared {
						readers--
					} else {
						writing = false
					}
					mu.Unlock()
				}
				if err := l.Release(ctx); err != nil || msg != "" {
					t.Errorf("%s (release: %v)", msg, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("grants: %d readers' (%d beside others), %d writers'", grants[0], joined, grants[1])
	if joined == 0 || grants[1] == 0 {
		t.Errorf("grants: %d readers' (%d beside others), %d writers'; want readers together and writers", grants[0], joined, grants[1])
	}
}
