// Test helpers: etcd clients, stores and bounded contexts.

package etcdlease_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"runtime"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/etcdlease"
	"github.com/leasekit/lease/leasetest"
)

// endpoints returns the etcd endpoints of the test server (from
// LEASE_TEST_ETCD_ENDPOINTS), skipping the test when it is unset.
func endpoints(t testing.TB) []string {
	t.Helper()
	return strings.Split(leasetest.Env(t, "LEASE_TEST_ETCD_ENDPOINTS"), ",")
}

// newCli returns an etcd client for eps, closed at cleanup.
func newCli(t testing.TB, eps []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("clientv3.New(%v): %v", eps, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// newStore returns a store over cli with prefix, closed at cleanup.
func newStore(t testing.TB, cli *clientv3.Client, prefix string) *etcdlease.Store {
	t.Helper()
	s, err := etcdlease.New(cli, etcdlease.WithPrefix(prefix))
	if err != nil {
		t.Fatalf("etcdlease.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// testPrefix returns a fresh key prefix for one test.
func testPrefix() string { return "/leasekit-test/" + randHex(6) + "/" }

// randHex returns 2n random hex characters.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testCtx returns a context cancelled after d or at cleanup.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// suiteTTL is the conformance suite's TTL: etcd's minimum lease TTL.
const suiteTTL = etcdlease.MinTTL

// TestConformance runs the suite on the single etcd node of ./scripts/test.
func TestConformanceEtcd(t *testing.T) { runSuite(t, newCli(t, endpoints(t))) }

// runSuite runs the conformance suite over cli: a store per namespace, at
// the suite's TTL.
func runSuite(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	// Connect before the suite, whose leak check must not count the client's
	// connections (opened lazily): round trips until the goroutines settle.
	ctx := testCtx(t, 30*time.Second)
	stable, last := 0, -1
	for deadline := time.Now().Add(5 * time.Second); stable < 3 && time.Now().Before(deadline); {
		for range 5 {
			if _, err := cli.Get(ctx, "/leasekit-test/warm-up"); err != nil {
				t.Fatalf("etcd is not reachable: %v", err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		if n := runtime.NumGoroutine(); n == last {
			stable++
		} else {
			stable, last = 0, n
		}
	}
	leasetest.Run(t, leasetest.Harness{
		NewStore: func(t testing.TB, ns string) driver.Store {
			s, err := etcdlease.New(cli, etcdlease.WithPrefix("/leasekit-test/"+ns+"/"))
			if err != nil {
				t.Fatalf("etcdlease.New: %v", err)
			}
			return s
		},
		TTL: suiteTTL,
	})
}
