package memlease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

// TestClientHonoursLimits checks that a Client over a Store made WithLimits
// rejects what the store would, before any round trip.
func TestClientHonoursLimits(t *testing.T) {
	ctx := context.Background()
	s := memlease.New(memlease.WithLimits(driver.Caps{MinTTL: 100 * time.Millisecond, MaxTTL: time.Minute, MaxKeyLen: 16}))
	defer s.Close()
	c, err := lease.New(s, lease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		what string
		key  string
		opts []lease.AcquireOption
	}{
		{"key over the store's limit", strings.Repeat("k", 17), nil},
		{"TTL below the store's minimum", "k", []lease.AcquireOption{lease.WithTTL(50 * time.Millisecond)}},
		{"TTL above the store's maximum", "k", []lease.AcquireOption{lease.WithTTL(2 * time.Minute)}},
	} {
		if _, err := c.TryAcquire(ctx, tc.key, tc.opts...); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("TryAcquire with a %s: %v, want ErrInvalid", tc.what, err)
		}
	}
	l, err := c.TryAcquire(ctx, strings.Repeat("k", 16), lease.WithTTL(100*time.Millisecond))
	if err != nil {
		t.Fatalf("TryAcquire at the store's limits: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
	if _, err := lease.New(s, lease.WithTTL(50*time.Millisecond)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("lease.New with a TTL below the store's minimum: %v, want ErrInvalid", err)
	}
}
