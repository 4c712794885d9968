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
	runSuite(t, servers(t))
}

// runSuite runs leasetest.Run with stores on srvs.
func runSuite(t *testing.T, srvs []string) {
	base := root("conformance")
	leasetest.Run(t, leasetest.Harness{
		TTL: testTTL,
		NewStore: func(t testing.TB, ns string) lease.Store {
			s, err := zklease.Dial(testCtx(t, 30*time.Second), srvs, testSession, zklease.WithRoot(base+"/"+ns))
			if err != nil {
				t.Fatalf("zklease.Dial: %v", err)
			}
			return s
		},
	})
}
