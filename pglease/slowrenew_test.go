package pglease_test

import (
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/pglease"
)

// TestSlowRenewal: a renewal slower than the renew interval (here: blocked
// by a row lock, as a starved or fsync-bound server delays it) that ends
// before the local deadline keeps the lease in both modes. Advisory mode
// used to cut the statement at the renew interval, which ended the session
// and with it every lock it held.
func TestSlowRenewal(t *testing.T) {
	pool := sharedPool(t)
	for _, mode := range []pglease.Mode{pglease.ModeTable, pglease.ModeAdvisory} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ns := namespace(t)
			c := newClient(t, storeNS(t, pool, mode, ns), lease.WithTTL(6*time.Second))
			ctx := testCtx(t, time.Minute)
			l, err := c.TryAcquire(ctx, "slow")
			if err != nil {
				t.Fatal(err)
			}
			// The renewal at 2 s is cut at 4 s (the renew interval); the lock
			// holds it until 4.5 s; the lease's deadline is at 5.4 s.
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "SELECT 1 FROM leasekit_leases WHERE ns = $1 AND key = 'slow' FOR UPDATE", ns); err != nil {
				t.Fatal(err)
			}
			time.Sleep(4500 * time.Millisecond)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // the deadline has passed, and the next renewal is due
			if err := l.Err(); err != nil {
				t.Fatalf("lost after a renewal slower than the renew interval: %v", err)
			}
		})
	}
}
