// Bad input and faults: invalid or hostile table names, and a server crash
// and restart while leases are held.

package pglease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/pglease"
)

func TestInvalidTable(t *testing.T) {
	pool := newPool(t, sharedDSN(t), 4)
	for _, name := range []string{"", "a.b.c", ".leases", "public.", strings.Repeat("x", 64), "public." + strings.Repeat("x", 64), "bad\x00name"} {
		s, err := pglease.New(pool, pglease.WithTable(name))
		if !errors.Is(err, lease.ErrInvalid) || s != nil {
			t.Errorf("New(WithTable(%q)) = %v, %v; want ErrInvalid", name, s, err)
		}
	}
	if _, err := pglease.New(nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New(nil pool) = %v, want ErrInvalid", err)
	}
	if _, err := pglease.New(pool, pglease.WithMode(pglease.Mode(7))); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New with an unknown mode = %v, want ErrInvalid", err)
	}
	// A name that needs quoting is quoted, not injected.
	ctx := testCtx(t, 30*time.Second)
	odd := `Odd "Name"; DROP TABLE x; ` + randHex(3)
	s, err := pglease.New(pool, pglease.WithTable(odd), pglease.WithNamespace(namespace(t)))
	if err != nil {
		t.Fatalf("New(WithTable(%q)): %v", odd, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+s.Table()+", "+s.QueueTable())
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate(%s): %v", s.Table(), err)
	}
	if g, err := s.Acquire(ctx, req("k", "h", time.Second)); err != nil || g.Fence != 1 {
		t.Errorf("Acquire in table %s: %+v, %v", s.Table(), g, err)
	}
}

// TestServerRestart: a private server crashes and restarts while a lease is
// held. Advisory-mode leases are lost (their session died); table-mode rows
// survive on disk. Either way the key is re-acquirable afterwards with a
// larger fence, and the store works as before.
func TestServerRestart(t *testing.T) {
	pg := startPrivatePG(t)
	const ttl = time.Second
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 90*time.Second)
			pool := newPool(t, pg.DSN(), 8)
			migrate(t, pool)
			ns := namespace(t)
			ca := newClient(t, storeNS(t, pool, mode, ns), lease.WithTTL(ttl))
			cb := newClient(t, storeNS(t, pool, mode, ns), lease.WithTTL(ttl))
			key := "restart-" + randHex(4)
			l, err := ca.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			pg.crash()
			crashed := time.Now()
			pg.start()
			t.Logf("server down for %v", time.Since(crashed).Round(time.Millisecond))

			if mode == pglease.ModeAdvisory {
				select {
				case <-l.Done():
				case <-time.After(2*ttl + 5*time.Second):
					t.Fatalf("advisory lease not reported lost within %v of the crash", 2*ttl+5*time.Second)
				}
				if !errors.Is(l.Err(), lease.ErrLost) {
					t.Errorf("advisory lease after the crash: Err() = %v, want ErrLost", l.Err())
				}
				t.Logf("advisory lease lost %v after the crash: %v", time.Since(crashed).Round(time.Millisecond), l.Err())
			} else {
				err := l.Release(ctx)
				t.Logf("table-mode lease after the restart: Release() = %v", err)
				if err != nil && !errors.Is(err, lease.ErrLost) {
					t.Errorf("Release after the restart: %v, want nil or ErrLost", err)
				}
			}
			actx, cancel := context.WithTimeout(ctx, 2*ttl+10*time.Second)
			defer cancel()
			l2, err := cb.Acquire(actx, key)
			if err != nil {
				t.Fatalf("Acquire after the restart: %v", err)
			}
			if l2.Fence() <= l.Fence() {
				t.Errorf("fence after the restart %d, want > %d", l2.Fence(), l.Fence())
			}
			info, err := cb.Inspect(ctx, key)
			if err != nil || !info.Held || info.Fence != l2.Fence() {
				t.Errorf("Inspect after the restart: %+v, %v; want held with fence %d", info, err, l2.Fence())
			}
			l3, err := ca.TryAcquire(ctx, "after-"+key)
			if err != nil || l3.Fence() != 1 {
				t.Errorf("a new key after the restart: %v, %v; want fence 1", l3, err)
			}
		})
	}
}
