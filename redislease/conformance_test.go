// The leasetest conformance suite against the Redis store, on the shared
// Redis (LEASE_TEST_REDIS_ADDR) and on a private three-node cluster.

package redislease_test

import (
	"sync"
	"testing"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/redislease"
	"github.com/redis/go-redis/v9"
)

// runConformance runs the suite on stores that each get a fresh client from
// newClient and prefix "leasetest:<ns>:". Keys are deleted through admin
// when the whole test ends, since stores of one namespace outlive each other.
func runConformance(t *testing.T, admin redis.UniversalClient, newClient func() redis.UniversalClient) {
	var mu sync.Mutex
	var prefixes []string
	t.Cleanup(func() {
		for _, p := range prefixes {
			deletePrefix(admin, p)
		}
	})
	leasetest.Run(t, leasetest.Harness{
		NewStore: func(t testing.TB, ns string) driver.Store {
			prefix := "leasetest:" + ns + ":"
			mu.Lock()
			prefixes = append(prefixes, prefix)
			mu.Unlock()
			c := newClient()
			t.Cleanup(func() { _ = c.Close() })
			s, err := redislease.New(c, redislease.WithPrefix(prefix))
			if err != nil {
				t.Fatalf("redislease.New: %v", err)
			}
			return s
		},
	})
}

func TestConformance(t *testing.T) {
	addr := sharedClient(t).Options().Addr
	runConformance(t, sharedClient(t), func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) })
}

func TestConformanceCluster(t *testing.T) {
	addrs := startCluster(t)
	runConformance(t, newClusterClient(t, addrs), func() redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	})
}
