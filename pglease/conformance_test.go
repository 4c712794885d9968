// The leasetest conformance suite, on each store.

package pglease_test

import (
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/pglease"
)

func TestConformanceTable(t *testing.T) { conformance(t, pglease.ModeTable) }

func TestConformanceAdvisory(t *testing.T) { conformance(t, pglease.ModeAdvisory) }

func conformance(t *testing.T, mode pglease.Mode) {
	// One pool and one migration for the whole suite, made before Run so
	// that the pool's own goroutines predate its leak checks.
	pool := sharedPool(t)
	// An advisory lease lives on its session, which a statement that outlives
	// its deadline ends (pgx closes the connection): a renewal gets TTL/3, so
	// the suite's 500ms TTL left 166ms, which a loaded CI machine overran.
	// In table mode every attempt on a key, refused ones too, locks its row
	// (the upsert) until it commits, and a holder's release or renewal waits
	// behind them: twelve goroutines on three semaphore slots, committing
	// with fsync on a loaded CI machine, made a release of a slot held 25ms
	// wait past 500ms (SemaphoreLimit, "not held by this token").
	ttl := time.Second
	leasetest.Run(t, leasetest.Harness{
		TTL: ttl,
		NewStore: func(t testing.TB, ns string) driver.Store {
			s, err := pglease.New(pool, pglease.WithMode(mode), pglease.WithNamespace(ns))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			// Close idle pooled connections before the leak check: pgx may
			// leave a background reader on a connection whose write was slow.
			t.Cleanup(pool.Reset)
			return s
		},
	})
}
