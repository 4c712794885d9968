// The leasetest conformance suite against the Redis store, on the shared
// Redis (LEASE_TEST_REDIS_ADDR) and on a private three-node cluster.

package redislease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/redislease"
	"github.com/redis/go-redis/v9"
)

// harness makes stores that each get a fresh client from newClient (closed
// when the subtest ends) and prefix "leasetest:<ns>:". The namespaces' keys
// are deleted through admin once the whole test ends: not earlier, since
// stores of one namespace outlive each other.
func harness(t *testing.T, admin redis.UniversalClient, newClient func() redis.UniversalClient) leasetest.Harness {
	var mu sync.Mutex
	var prefixes []string
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range prefixes {
			deletePrefix(admin, p)
		}
	})
	return leasetest.Harness{
		NewStore: func(t testing.TB, ns string) lease.Store {
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
	}
}

// runConformance runs the suite with the stores of harness.
func runConformance(t *testing.T, admin redis.UniversalClient, newClient func() redis.UniversalClient) {
	leasetest.Run(t, harness(t, admin, newClient))
}

func TestConformance(t *testing.T) {
	admin := sharedClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := admin.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis at LEASE_TEST_REDIS_ADDR: %v", err)
	}
	addr := admin.Options().Addr
	runConformance(t, admin, func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: addr})
	})
}

func TestConformanceCluster(t *testing.T) {
	addrs := startCluster(t)
	runConformance(t, newClusterClient(t, addrs), func() redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	})
}
