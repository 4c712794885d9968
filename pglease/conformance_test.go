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
					return s
				},
			})
		})
	}
}
