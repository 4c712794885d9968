// Listing and breaking beyond the conformance suite: the tombstone's own
// expiry, and a Ring, which cannot list.

package redislease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/redis/go-redis/v9"
)

func TestBreakTombstoneExpires(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	const ttl = 300 * time.Millisecond
	r := req("k", token(t), "stuck", ttl)
	if _, err := s.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Break(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if left := c.PTTL(ctx, leaseKey(s.Prefix(), "k")+":b").Val(); left <= 0 || left > ttl {
		t.Errorf("the tombstones expire in %v, want within the hold's %v", left, ttl)
	}
	if err := s.Renew(ctx, r); !errors.Is(err, lease.ErrBroken) {
		t.Errorf("Renew of the evicted token = %v, want ErrBroken", err)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	if err := s.Renew(ctx, r); !errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrBroken) {
		t.Errorf("Renew after the tombstone expired = %v, want ErrNotHeld, not ErrBroken", err)
	}
	if page, _, err := s.List(ctx, "", "", 100); err != nil || len(page) != 0 {
		t.Errorf("List after the tombstone expired = %+v, %v; want nothing", page, err)
	}
}

func TestListRingUnsupported(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": sharedClient(t).Options().Addr}})
	t.Cleanup(func() { _ = ring.Close() })
	s := newStore(t, ring)
	if _, _, err := s.List(testCtx(t, 10*time.Second), "", "", 10); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("List on a Ring = %v, want ErrUnsupported", err)
	}
}
