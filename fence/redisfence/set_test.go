package redisfence_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence/internal/fencetest"
	"github.com/leasekit/lease/fence/redisfence"
	"github.com/leasekit/lease/leasetest"
)

// TestSet runs the fenced-write scenario on keys with and without a hash tag.
func TestSet(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: leasetest.Env(t, "LEASE_TEST_REDIS_ADDR")})
	t.Cleanup(func() { _ = rdb.Close() })
	for name, prefix := range map[string]string{"Plain": "redisfence:test:", "HashTag": "{redisfence}:test:"} {
		t.Run(name, func(t *testing.T) {
			fencetest.Run(t, func(t *testing.T) fencetest.Resource {
				key := prefix + randHex(8)
				fk, err := redisfence.FenceKey(key)
				if err != nil {
					t.Fatalf("FenceKey: %v", err)
				}
				t.Cleanup(func() { rdb.Del(context.Background(), key, fk) })
				return fencetest.Resource{
					Write: func(ctx context.Context, fence uint64, v string) error {
						return redisfence.Set(ctx, rdb, key, fence, v)
					},
					Read: func(ctx context.Context) (string, error) { return rdb.Get(ctx, key).Result() },
				}
			})
		})
	}
}

// TestFenceKey: the fence key shares the key's hash tag, or has the whole
// key as its tag; a key with braces but no hash tag is refused.
func TestFenceKey(t *testing.T) {
	for key, want := range map[string]string{
		"job":        "{job}:fence",
		"a:b c":      "{a:b c}:fence",
		"{user1}:x":  "{user1}:x:fence",
		"p{t}q{r}s":  "p{t}q{r}s:fence",
		"a}b":        "",
		"a{}b":       "",
		"a{b":        "{a{b}:fence",
		"":           "",
		"{}{x}":      "",
		"x{y}z}":     "x{y}z}:fence",
		"{a}b}{c}":   "{a}b}{c}:fence",
		"tag{only}":  "tag{only}:fence",
		"{{nested}}": "{{nested}}:fence",
	} {
		got, err := redisfence.FenceKey(key)
		if got != want || (want == "") != errors.Is(err, lease.ErrInvalid) {
			t.Errorf("FenceKey(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
