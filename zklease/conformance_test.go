// The leasetest conformance suite against the ZooKeeper of
// LEASE_TEST_ZK_SERVERS; every store has its own session, like a process.

package zklease_test

import (
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/zklease"
)

func TestConformanceZK(t *testing.T) {
	runSuite(t, servers(t), testTTL, testSession)
}

// TestConformanceZKWithCredentials: the suite with stores that log in as one
// digest identity and so create their nodes with the creator ACL.
func TestConformanceZKWithCredentials(t *testing.T) {
	srvs := servers(t)
	auth := zklease.WithAuth("digest", []byte("lk-"+randHex(4)+":pw-"+randHex(8)))
	// The owner's connection logs in to remove the suite's nodes; its own
	// root is the default one, which other tests may have made open to all.
	owner := dial(t, srvs, auth, zklease.WithACL(zk.WorldACL(zk.PermAll)...))
	openParent(t, owner.Conn(), "/leasekit-test")
	base := runSuite(t, srvs, testTTL, testSession, auth)
	t.Cleanup(func() { removeAll(owner.Conn(), base) })
}

// The suite's TTL on the private ensemble: three JVMs on a busy machine can
// stall a write for half a second. The suite holds leases for 6 TTLs.
const (
	ensembleTTL     = 2 * time.Second
	ensembleSession = 6 * ensembleTTL
)

// runSuite runs leasetest.Run with stores on srvs, the given TTL, session
// timeout and options, under a fresh root, which it returns.
func runSuite(t *testing.T, srvs []string, ttl, session time.Duration, opts ...zklease.Option) string {
	base := root("conformance")
	leasetest.Run(t, leasetest.Harness{
		TTL: ttl,
		NewStore: func(t testing.TB, ns string) driver.Store {
			s, err := zklease.Dial(testCtx(t, 30*time.Second), srvs, session, slices.Concat(opts, []zklease.Option{zklease.WithRoot(base + "/" + ns)})...)
			if err != nil {
				t.Fatalf("zklease.Dial: %v", err)
			}
			return s
		},
	})
	return base
}
