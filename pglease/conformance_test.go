// The leasetest conformance suite and its FIFO subtests, in table mode and
// in advisory mode.

package pglease_test

import (
	"testing"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/pglease"
)

func TestConformance(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			// One pool and one migration for the whole suite, made before
			// Run so that the pool's own goroutines predate its leak checks.
			pool := sharedPool(t)
			leasetest.Run(t, leasetest.Harness{
				NewStore: func(t testing.TB, ns string) lease.Store {
					s, err := pglease.New(pool, pglease.WithMode(mode), pglease.WithNamespace(ns))
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					// Close the pool's connections after the subtest (before
					// its leak check, which runs last): pgx starts a
					// background reader on a connection whose write is slow
					// (a busy machine), and that goroutine waits in Read
					// until the connection gets data or is closed, so an
					// idle pooled connection would keep it past the check.
					t.Cleanup(pool.Reset)
					return s
				},
			})
		})
	}
}
