// The leasetest conformance suite against the ZooKeeper of
// LEASE_TEST_ZK_SERVERS; every store has its own session, like a process.

package zklease_test

import (
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/zklease"
)

func TestConformance(t *testing.T) {
	runSuite(t, servers(t), testTTL, testSession)
}

// ensembleTTL is the suite's TTL on the private three-server ensemble: three
// JVMs on a small, busy CI machine can stall a write for half a second, and a
// 1 s TTL then loses leases (correctly, at the local deadline) that the test
// expects to keep.
// The suite holds some leases for 6 TTLs, so the session must be that long.
const (
	ensembleTTL     = 2 * time.Second
	ensembleSession = 6 * ensembleTTL
)

// runSuite runs leasetest.Run with stores on srvs, the given TTL and
// session timeout.
func runSuite(t *testing.T, srvs []string, ttl, session time.Duration) {
	base := root("conformance")
	leasetest.Run(t, leasetest.Harness{
		TTL: ttl,
		NewStore: func(t testing.TB, ns string) lease.Store {
			s, err := zklease.Dial(testCtx(t, 30*time.Second), srvs, session, zklease.WithRoot(base+"/"+ns))
			if err != nil {
				t.Fatalf("zklease.Dial: %v", err)
			}
			return s
		},
	})
}
