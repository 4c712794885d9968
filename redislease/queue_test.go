// Redis-specific parts of the FIFO queue: its two sorted sets expire with
// their last entry, so a key whose waiters all died leaves nothing behind.

package redislease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

func TestQueueAbandonedVanishes(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	a := req("k", token(t), "A", time.Minute)
	if _, err := s.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	lk := leaseKey(s.Prefix(), "k")
	for _, ttl := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		w := req("k", token(t), "dead", ttl)
		w.Queue = true
		if _, err := s.Acquire(ctx, w); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("queued Acquire = %v, want ErrHeld", err)
		}
	}
	for _, k := range []string{lk + ":q", lk + ":qx"} {
		if ms := c.PTTL(ctx, k).Val(); ms <= 300*time.Millisecond || ms > 600*time.Millisecond {
			t.Errorf("PTTL %s = %v, want the latest entry's expiry, 600ms", k, ms)
		}
	}
	time.Sleep(700 * time.Millisecond)
	if n := c.Exists(ctx, lk+":q", lk+":qx").Val(); n != 0 {
		t.Errorf("%d queue keys left after every waiter died, want none", n)
	}
}
