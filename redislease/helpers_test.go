// Shared helpers of the redislease tests: clients, stores, keys and tokens.

package redislease_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/redislease"
	"github.com/redis/go-redis/v9"
)

// testCtx returns a context that ends with the test or after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sharedClient returns a client of the Redis at LEASE_TEST_REDIS_ADDR (the
// test is skipped when it is unset).
func sharedClient(t testing.TB) *redis.Client {
	t.Helper()
	return newClient(t, leasetest.Env(t, "LEASE_TEST_REDIS_ADDR"))
}

func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var seq atomic.Int64

// uniquePrefix returns a namespace prefix no other test or run uses.
func uniquePrefix(t testing.TB) string {
	name := strings.NewReplacer("/", "_", "{", "(", "}", ")").Replace(t.Name())
	return fmt.Sprintf("leasetest:redislease:%s:%d:%s:", name, seq.Add(1), randHex(t, 4))
}

// newStore returns a store on c under a fresh prefix, deleted at cleanup.
func newStore(t testing.TB, c redis.UniversalClient, opts ...redislease.Option) *redislease.Store {
	t.Helper()
	prefix := uniquePrefix(t)
	s, err := redislease.New(c, append([]redislease.Option{redislease.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { deletePrefix(c, prefix) })
	return s
}

// deletePrefix removes every key under prefix (best effort).
func deletePrefix(c redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pattern := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(prefix) + "*"
	del := func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, pattern, 100).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		return iter.Err()
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return del(ctx, n) })
		return
	}
	_ = del(ctx, c)
}

func randHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// token returns a fresh lease token (32 hex characters).
func token(t testing.TB) string { return randHex(t, 16) }

func req(key, tok, holder string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Token: tok, Holder: holder, TTL: ttl}
}

// leaseKey is the documented key of a lease (see the package documentation).
func leaseKey(prefix, key string) string {
	return prefix + "{" + strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D").Replace(key) + "}"
}
