// Test helpers: servers from the environment, stores on their own sessions.

package zklease_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/zklease"
)

// Session timeout and lease TTL of the tests. The suite uses leases of up
// to 4 TTLs, which must fit in the session timeout (the Store's MaxTTL).
const (
	testSession = 6 * time.Second
	testTTL     = time.Second
)

func servers(t testing.TB) []string {
	t.Helper()
	return strings.Split(leasetest.Env(t, "LEASE_TEST_ZK_SERVERS"), ",")
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// dial returns a Store with its own session on srvs, closed at cleanup.
func dial(t testing.TB, srvs []string, opts ...zklease.Option) *zklease.Store {
	t.Helper()
	s, err := zklease.Dial(testCtx(t, 30*time.Second), srvs, testSession, opts...)
	if err != nil {
		t.Fatalf("zklease.Dial(%v): %v", srvs, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func root(name string) string { return "/leasekit-test/" + name + "-" + randHex(4) }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func token() string { return randHex(16) }

func connect(t *testing.T, srvs []string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(srvs, testSession, zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn
			}
		case <-deadline:
			t.Fatal("no ZooKeeper session within 30s")
		}
	}
}

// openParent creates p (the shared parent of the tests' roots) open to
// anyone, if it is missing: a store with credentials would create it with
// its creator ACL, and the other tests' stores could not use it.
func openParent(t *testing.T, c *zk.Conn, p string) {
	t.Helper()
	if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("create %s: %v", p, err)
	}
}

func removeAll(c *zk.Conn, p string) {
	kids, _, _ := c.Children(p)
	for _, k := range kids {
		removeAll(c, p+"/"+k)
	}
	_ = c.Delete(p, -1)
}
