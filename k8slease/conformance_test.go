// The leasetest conformance suite on the test apiserver.

package k8slease_test

import (
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
)

// TestConformanceK8s runs the suite with a store per namespace, each its
// own name prefix in one Kubernetes namespace.
func TestConformanceK8s(t *testing.T) {
	cs := client(t)
	leasetest.Run(t, leasetest.Harness{
		TTL: time.Second,
		NewStore: func(t testing.TB, ns string) driver.Store {
			return newStore(t, cs, testPrefix(ns))
		},
	})
}
