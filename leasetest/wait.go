// AwaitFree: polling a store until it reports a key free, for store tests.

package leasetest

import (
	"context"
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
)

// AwaitFree polls s.Inspect(key) every poll until the key is not held and
// returns how long that took; the test fails if it is still held after
// within, or if Inspect fails.
func AwaitFree(t testing.TB, ctx context.Context, s driver.Store, key string, within, poll time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		info, err := s.Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect(%q): %v", key, err)
		}
		if !info.Held {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%q is still held %v later: %+v", key, within, info)
		}
		time.Sleep(poll)
	}
}
