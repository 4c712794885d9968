// The leasetest conformance suite, on each store.

package mysqllease_test

import (
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/mysqllease"
)

func TestConformanceMySQLTable(t *testing.T) { conformance(t, mysqllease.ModeTable) }

func TestConformanceMySQLGetLock(t *testing.T) { conformance(t, mysqllease.ModeGetLock) }

func conformance(t *testing.T, mode mysqllease.Mode) {
	// One database handle and one migration for the whole suite, made
	// before Run so that its goroutines predate the leak checks. A GET_LOCK
	// lease's TTL is whole seconds.
	db := migratedDB(t)
	ttl := leasetest.DefaultTTL
	if mode == mysqllease.ModeGetLock {
		ttl = time.Second
	}
	leasetest.Run(t, leasetest.Harness{
		TTL: ttl,
		NewStore: func(t testing.TB, ns string) driver.Store {
			s, err := mysqllease.New(db, mysqllease.WithMode(mode), mysqllease.WithNamespace(ns))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			// Close idle pooled connections before the leak check: each
			// has a watcher goroutine.
			t.Cleanup(func() { db.SetMaxIdleConns(0); db.SetMaxIdleConns(16) })
			return s
		},
	})
}
