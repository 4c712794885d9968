// Fuzzing the Client's input checks: keys, TTLs, renew intervals, drift
// margins and holders, against the in-memory store. Nothing may panic; input
// the Client cannot accept returns an error matching ErrInvalid, and input it
// accepts gives a lease that releases cleanly.

package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/memlease"
)

func FuzzTryAcquireInput(f *testing.F) {
	ms := int64(time.Millisecond)
	f.Add("jobs/nightly", 500*ms, int64(0), int64(-1), "web-1:42")
	f.Add("", 500*ms, int64(0), int64(-1), "")
	f.Add("a\x00b", 500*ms, int64(0), int64(-1), "h")
	f.Add("\xff\xfe", 500*ms, int64(0), int64(-1), "h")
	f.Add(strings.Repeat("k", lease.MaxKeyLen), 500*ms, 100*ms, 10*ms, "h")
	f.Add(strings.Repeat("k", lease.MaxKeyLen+1), 500*ms, 100*ms, 10*ms, "h")
	f.Add("k", 9*ms, int64(0), int64(-1), "h")
	f.Add("k", int64(-1), int64(0), int64(-1), "h")
	f.Add("k", 500*ms, 500*ms, int64(0), "h")
	f.Add("k", 500*ms, int64(-5), int64(0), "h")
	f.Add("k", 500*ms, int64(0), 250*ms, "h")
	f.Add("k", int64(1<<62), int64(0), int64(-1), strings.Repeat("h", lease.MaxKeyLen+1))
	f.Add("'); DROP TABLE leasekit_leases; --", 500*ms, int64(0), int64(-1), "redis.call('FLUSHALL')")
	f.Add("../../etc/passwd", 500*ms, int64(0), int64(-1), "{x}")
	f.Fuzz(func(t *testing.T, key string, ttl, renew, drift int64, holder string) {
		store := memlease.New()
		defer store.Close()
		c, err := lease.New(store, lease.WithTTL(time.Second))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer c.Close()
		opts := []lease.AcquireOption{
			lease.WithTTL(time.Duration(ttl)),
			lease.WithRenewInterval(time.Duration(renew)),
			lease.WithDriftMargin(time.Duration(drift)),
			lease.WithHolder(holder),
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := c.TryAcquire(ctx, key, opts...)

		badKey := key == "" || len(key) > lease.MaxKeyLen || !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0
		// 0 means the default TTL; anything else below the minimum is refused.
		badTTL := ttl != 0 && time.Duration(ttl) < lease.MinTTL
		badHolder := len(holder) > lease.MaxKeyLen
		if badKey || badTTL || badHolder {
			if !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("TryAcquire(%q, ttl %v, holder of %d bytes) = %v, want ErrInvalid", key, time.Duration(ttl), len(holder), err)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("TryAcquire(%q, ttl %v renew %v drift %v): %v, want success or ErrInvalid", key, time.Duration(ttl), time.Duration(renew), time.Duration(drift), err)
			}
			var inv *lease.InvalidError
			if !errors.As(err, &inv) || inv.Field == "" {
				t.Fatalf("error %v is not an *InvalidError naming its field", err)
			}
			return
		}
		if l.Key() != key || l.Fence() == 0 || l.Err() != nil {
			t.Fatalf("lease key %q fence %d err %v; want key %q, a fence, no error", l.Key(), l.Fence(), l.Err(), key)
		}
		if tok := l.Token(); len(tok) != 32 || strings.Trim(tok, "0123456789abcdef") != "" {
			t.Fatalf("token %q is not 32 hex characters (128 bits)", tok)
		}
		if info, err := c.Inspect(ctx, key); err != nil || !info.Held || info.Fence != l.Fence() {
			t.Fatalf("Inspect after acquire = %+v, %v; want held with fence %d", info, err, l.Fence())
		}
		if err := l.Release(ctx); err != nil && !errors.Is(err, lease.ErrLost) {
			// A TTL of a few ms may expire before the release (ErrLost or ErrNotHeld).
			if !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("Release: %v", err)
			}
		}
	})
}
