package mysqllease_test

import (
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/mysqllease"
)

// TestSlowRenewal: a renewal slower than the renew interval (blocked by a
// row lock here, as a starved server delays it) that ends before the local
// deadline keeps the lease in both modes. GET_LOCK mode used to cut the
// statement at the renew interval, which closed the connection holding the
// lock.
func TestSlowRenewal(t *testing.T) {
	db := migratedDB(t)
	for name, mode := range map[string]mysqllease.Mode{"table": mysqllease.ModeTable, "getlock": mysqllease.ModeGetLock} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t)
			c, err := lease.New(storeNS(t, db, mode, ns), lease.WithTTL(6*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			ctx := testCtx(t, time.Minute)
			l, err := c.TryAcquire(ctx, "slow")
			if err != nil {
				t.Fatal(err)
			}
			// The renewal at 2 s is cut at 4 s (the renew interval); the lock
			// holds it until 4.5 s; the lease's deadline is at 5.4 s.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, "SELECT 1 FROM leasekit_leases WHERE ns = ? AND k = 'slow' FOR UPDATE", ns); err != nil {
				t.Fatal(err)
			}
			time.Sleep(4500 * time.Millisecond)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // the deadline has passed, and the next renewal is due
			if err := l.Err(); err != nil {
				t.Fatalf("lost after a renewal slower than the renew interval: %v", err)
			}
		})
	}
}
