// Shared helpers of the redislease tests: clients, stores, keys, tokens and
// the Redis Cluster slot function.

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

	"github.com/leasekit/lease"
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
// test is skipped when it is unset), closed when the test ends.
func sharedClient(t testing.TB) *redis.Client {
	t.Helper()
	addr := leasetest.Env(t, "LEASE_TEST_REDIS_ADDR")
	return newClient(t, addr)
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
	t.Helper()
	name := strings.NewReplacer("/", "_", "{", "(", "}", ")").Replace(t.Name())
	return fmt.Sprintf("leasetest:redislease:%s:%d:%s:", name, seq.Add(1), randHex(t, 4))
}

// newStore returns a store on c under a fresh prefix whose keys are deleted
// when the test ends.
func newStore(t testing.TB, c redis.UniversalClient) *redislease.Store {
	t.Helper()
	return storeWithPrefix(t, c, uniquePrefix(t))
}

func storeWithPrefix(t testing.TB, c redis.UniversalClient, prefix string) *redislease.Store {
	t.Helper()
	s, err := redislease.New(c, redislease.WithPrefix(prefix))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		deletePrefix(c, prefix)
	})
	return s
}

// deletePrefix removes every key under prefix (best effort).
func deletePrefix(c redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pattern := escapeGlob(prefix) + "*"
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

func escapeGlob(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}

func randHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// token returns a fresh lease token (32 hex characters).
func token(t testing.TB) string { return randHex(t, 16) }

func req(key, tok, holder string, ttl time.Duration) lease.Request {
	return lease.Request{Key: key, Token: tok, Holder: holder, TTL: ttl}
}

// The documented key layout (see the package documentation).
var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// splitLease splits a lease string (token NUL fence NUL holder).
func splitLease(v string) (token, fence, holder string) {
	token, rest, _ := strings.Cut(v, "\x00")
	fence, holder, _ = strings.Cut(rest, "\x00")
	return token, fence, holder
}

func leaseKey(prefix, key string) string { return prefix + "{" + escaper.Replace(key) + "}" }
func fenceKey(prefix, key string) string { return leaseKey(prefix, key) + ":fence" }
func queueKey(prefix, key string) string { return leaseKey(prefix, key) + ":q" }
func queueExpiryKey(prefix, key string) string {
	return leaseKey(prefix, key) + ":qx"
}

// hashSlot is Redis Cluster's key slot: CRC16 (XMODEM) of the hash tag, or
// of the whole key if it has none, modulo 16384.
func hashSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// hashTag returns the hash tag Redis Cluster uses for key, or "" if none.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return key[i+1 : i+1+j]
}
