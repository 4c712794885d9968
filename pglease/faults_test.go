// Bad input and faults: invalid table names, keys and TTLs, an unreachable
// server, and a server crash and restart while leases are held.

package pglease_test

import (
	"context"
	"errors"
	"strconv"
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
	// A table that was never migrated: a clear error, not a silent creation.
	missing, err := pglease.New(pool, pglease.WithTable("pglease_never_migrated_"+randHex(4)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := missing.Acquire(ctx, req("k", "h", time.Second)); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Acquire on a table that was never migrated: %v, want a 'does not exist' error", err)
	}
	// A schema that does not exist.
	noSchema, err := pglease.New(pool, pglease.WithTable("pglease_no_schema_"+randHex(4)+".leases"))
	if err != nil {
		t.Fatal(err)
	}
	if err := noSchema.Migrate(ctx); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Errorf("Migrate into a missing schema: %v, want an error about the schema", err)
	}
}

func TestInvalidRequests(t *testing.T) {
	pool := sharedPool(t)
	ctx := testCtx(t, 30*time.Second)
	for _, mode := range modes {
		s := newStore(t, pool, mode)
		if lim := s.Limits(); lim.MaxKeyLen != pglease.MaxKeyLen || lim.MinTTL != time.Millisecond {
			t.Errorf("%v: Limits() = %+v", mode, lim)
		}
		longest := strings.Repeat("k", pglease.MaxKeyLen)
		cases := []struct {
			what string
			r    lease.Request
		}{
			{"empty key", req("", "h", time.Second)},
			{"key over the limit", req(longest+"k", "h", time.Second)},
			{"key with NUL", req("a\x00b", "h", time.Second)},
			{"key not UTF-8", req("\xff\xfe", "h", time.Second)},
			{"TTL below 1ms", req("k", "h", 999*time.Microsecond)},
			{"zero TTL", req("k", "h", 0)},
			{"empty token", lease.Request{Key: "k", Holder: "h", TTL: time.Second}},
			{"holder with NUL", req("k", "a\x00b", time.Second)},
		}
		for _, tc := range cases {
			if _, err := s.Acquire(ctx, tc.r); !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("%v: Acquire with %s: %v, want ErrInvalid", mode, tc.what, err)
			}
			if err := s.Renew(ctx, tc.r); !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("%v: Renew with %s: %v, want ErrInvalid", mode, tc.what, err)
			}
		}
		if _, err := s.Inspect(ctx, longest+"k"); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%v: Inspect of a key over the limit: %v, want ErrInvalid", mode, err)
		}
		// The longest key works; through a Client, a TTL under 1ms is refused
		// before any round trip.
		r := req(longest, "h", time.Second)
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Errorf("%v: Acquire of the longest key: %v", mode, err)
		} else if err := s.Release(ctx, r); err != nil {
			t.Errorf("%v: Release of the longest key: %v", mode, err)
		}
		c := newClient(t, s)
		if _, err := c.TryAcquire(ctx, "k", lease.WithTTL(500*time.Microsecond)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%v: TryAcquire with a 500µs TTL: %v, want ErrInvalid", mode, err)
		}
	}
}

// TestUnreachable: a pool whose server cannot be reached gives a transient
// (not held, not invalid) error, promptly.
func TestUnreachable(t *testing.T) {
	sharedDSN(t)
	port := freePort(t) // nothing listens there any more
	pool := newPool(t, "postgres://nobody@127.0.0.1:"+itoa(port)+"/none?sslmode=disable&connect_timeout=2", 4)
	for _, mode := range modes {
		s := newStore(t, pool, mode)
		ctx := testCtx(t, 10*time.Second)
		start := time.Now()
		_, err := s.Acquire(ctx, req("k", "h", time.Second))
		if err == nil || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrInvalid) || errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("%v: Acquire through an unreachable pool: %v, want a transient error", mode, err)
		} else if !strings.Contains(err.Error(), "connect") {
			t.Errorf("%v: Acquire through an unreachable pool: %v, want an error saying it cannot connect", mode, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v: Acquire took %v to fail", mode, d)
		}
		if err := s.Migrate(ctx); err == nil {
			t.Errorf("%v: Migrate through an unreachable pool succeeded", mode)
		}
		if _, err := s.Subscribe(ctx); err == nil {
			t.Errorf("%v: Subscribe through an unreachable pool succeeded", mode)
		}
		if err := s.Renew(ctx, req("k", "h", time.Second)); err == nil || errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%v: Renew through an unreachable pool: %v", mode, err)
		}
		t.Logf("%v: %v", mode, err)
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

func itoa(n int) string { return strconv.Itoa(n) }
