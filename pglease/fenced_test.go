// Fenced writes: FencedTx rejects a stalled holder's write and holds off a
// takeover until a write in progress commits.

package pglease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
)

// TestFencedTxStalledHolder: a holder whose renewals stall past its TTL has
// its FencedTx rejected, before and after another client takes the key
// over, and its function does not run; the new holder's write goes through.
func TestFencedTxStalledHolder(t *testing.T) {
	// The stalled holder's TTL outlasts a busy machine's late renewals
	// before the stall; the next holder's must not lapse during the test.
	const ttl, long = 2 * time.Second, 30 * time.Second
	pool := sharedPool(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			ns := namespace(t)
			s := storeNS(t, pool, mode, ns)
			fs := leasetest.Faulty(s)
			c1 := newClient(t, fs, lease.WithTTL(ttl))
			c2 := newClient(t, storeNS(t, pool, mode, ns), lease.WithTTL(long))
			var ran atomic.Int64
			write := func(l *lease.Lease) error {
				return s.FencedTx(ctx, l, func(ctx context.Context, tx pgx.Tx) error {
					ran.Add(1)
					_, err := tx.Exec(ctx, "SELECT 1")
					return err
				})
			}
			key := "fenced-" + randHex(4)
			l1, err := c1.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			if err := write(l1); err != nil || ran.Load() != 1 {
				t.Fatalf("FencedTx while held: %v (ran %d)", err, ran.Load())
			}
			fs.BlockRenewals(true) // the holder stalls
			// Wait until the store sees the lease expired (by the server's
			// clock, or the end of the idle session).
			for deadline := time.Now().Add(10 * ttl); ; time.Sleep(20 * time.Millisecond) {
				if info, err := s.Inspect(ctx, key); err != nil || !info.Held {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%q still held %v after its holder stalled", key, 10*ttl)
				}
			}
			if err := write(l1); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("FencedTx of the stalled holder past its TTL: %v, want ErrNotHeld", err)
			}
			l2, err := c2.TryAcquire(ctx, key)
			if err != nil || l2.Fence() <= l1.Fence() {
				t.Fatalf("TryAcquire by the next holder: %v, %v; want a fence above %d", l2, err, l1.Fence())
			}
			if err := write(l1); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("FencedTx of the stalled holder after the takeover: %v, want ErrNotHeld", err)
			}
			if err := write(l2); err != nil || ran.Load() != 2 {
				t.Fatalf("FencedTx of the next holder: %v (ran %d times in all, want 2)", err, ran.Load())
			}
		})
	}
}

// TestFencedTxHoldsOffTakeover: a holder that stalls inside FencedTx, after
// the check, past its TTL still commits, and nobody is granted the key (a
// larger fence) before that commit.
func TestFencedTxHoldsOffTakeover(t *testing.T) {
	const ttl = 300 * time.Millisecond
	pool := sharedPool(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			ns := namespace(t)
			s := storeNS(t, pool, mode, ns)
			fs := leasetest.Faulty(s)
			c1 := newClient(t, fs, lease.WithTTL(ttl))
			c2 := newClient(t, storeNS(t, pool, mode, ns), lease.WithTTL(ttl))
			key := "holdoff-" + randHex(4)
			l1, err := c1.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			fs.BlockRenewals(true)
			var committed time.Time
			type grant struct {
				l  *lease.Lease
				at time.Time
			}
			got := make(chan grant, 1)
			err = s.FencedTx(ctx, l1, func(ctx context.Context, tx pgx.Tx) error {
				go func() {
					l, err := c2.Acquire(ctx, key)
					if err != nil {
						t.Errorf("Acquire by the next holder: %v", err)
					}
					got <- grant{l, time.Now()}
				}()
				time.Sleep(2 * ttl) // paused past the TTL between the check and the commit
				committed = time.Now()
				return nil
			})
			if err != nil {
				t.Fatalf("FencedTx: %v", err)
			}
			g := <-got
			if g.l == nil || g.at.Before(committed) || g.l.Fence() <= l1.Fence() {
				t.Fatalf("the next holder got %v %v before the commit, want a fence above %d after it",
					g.l, committed.Sub(g.at), l1.Fence())
			}
		})
	}
}
