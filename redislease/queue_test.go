// The FIFO queue of waiters (lease.Queuer): the leasetest FIFO section and
// the Redis specifics (key layout, expiry of entries and of whole queues,
// announcements, arrival order).

package redislease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/redis/go-redis/v9"
)

// queueEntries returns the tokens of key's queue in order with their arrival
// scores, and their expiry scores.
func queueEntries(t *testing.T, ctx context.Context, c redis.UniversalClient, prefix, key string) ([]redis.Z, map[string]float64) {
	t.Helper()
	q, err := c.ZRangeWithScores(ctx, queueKey(prefix, key), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.ZRangeWithScores(ctx, queueExpiryKey(prefix, key), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	exp := map[string]float64{}
	for _, z := range x {
		exp[z.Member.(string)] = z.Score
	}
	return q, exp
}

func serverMillis(t *testing.T, ctx context.Context, c redis.UniversalClient) float64 {
	t.Helper()
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return float64(now.UnixMilli())
}

// The queue is two zsets beside the lease hash, in its slot: arrival order and
// entry expiry (server clock). A refresh keeps the arrival score and moves the
// expiry; the keys expire with their last entry and vanish when it leaves.
func TestQueueLayout(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	p := s.Prefix()
	ctx := testCtx(t, 20*time.Second)
	for _, k := range []string{"plain", "a{b}c", "}{", "%7B", "ключ 🔑"} {
		a := req(k, token(t), "A", 10*time.Second)
		if _, err := s.Acquire(ctx, a); err != nil {
			t.Fatal(err)
		}
		b, w := req(k, token(t), "B", 3*time.Second), req(k, token(t), "C", 5*time.Second)
		leasetest.Queued(t, ctx, s, b, 0)
		he := leasetest.Queued(t, ctx, s, w, 1)
		if he.Holder != "A" || he.Remaining <= 0 {
			t.Errorf("key %q: HeldError %+v, want holder A", k, he)
		}
		qk, xk := queueKey(p, k), queueExpiryKey(p, k)
		for _, rk := range []string{qk, xk} {
			if typ := c.Type(ctx, rk).Val(); typ != "zset" {
				t.Errorf("key %q: %q has type %q, want zset", k, rk, typ)
			}
			if hashTag(rk) != escaper.Replace(k) || hashSlot(rk) != hashSlot(leaseKey(p, k)) {
				t.Errorf("key %q: %q has hash tag %q (slot %d), want the lease key's", k, rk, hashTag(rk), hashSlot(rk))
			}
			// The keys live as long as the last entry: C's 5s.
			if ttl := c.PTTL(ctx, rk).Val(); ttl <= 4*time.Second || ttl > 5*time.Second {
				t.Errorf("key %q: PTTL %q = %v, want about 5s", k, rk, ttl)
			}
		}
		q1, x1 := queueEntries(t, ctx, c, p, k)
		if len(q1) != 2 || q1[0].Member != b.Token || q1[1].Member != w.Token || q1[0].Score >= q1[1].Score {
			t.Fatalf("key %q: queue %v, want B then C", k, q1)
		}
		now := serverMillis(t, ctx, c)
		if d := x1[b.Token] - now; d <= 2000 || d > 3000 {
			t.Errorf("key %q: B's entry expires in %vms, want about 3000", k, d)
		}
		// B refreshes with a longer TTL: same place, later expiry, and the
		// queue keys now live as long as B's entry.
		b.TTL = 8 * time.Second
		leasetest.Queued(t, ctx, s, b, 0)
		q2, x2 := queueEntries(t, ctx, c, p, k)
		if len(q2) != 2 || q2[0] != q1[0] || q2[1] != q1[1] {
			t.Errorf("key %q: queue after B's refresh %v, want unchanged %v", k, q2, q1)
		}
		if x2[b.Token] <= x1[b.Token]+4000 || x2[w.Token] != x1[w.Token] {
			t.Errorf("key %q: expiries after B's refresh %v, before %v", k, x2, x1)
		}
		if ttl := c.PTTL(ctx, qk).Val(); ttl <= 7*time.Second {
			t.Errorf("key %q: PTTL of the queue after B's refresh = %v, want about 8s", k, ttl)
		}
		// B gives up, A releases, C acquires: the queue is gone.
		if err := s.Release(ctx, b); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("key %q: queued B's Release = %v, want ErrNotHeld", k, err)
		}
		if err := s.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		w.Queue = true
		if _, err := s.Acquire(ctx, w); err != nil {
			t.Fatalf("key %q: C's Acquire, first in the queue: %v", k, err)
		}
		if n := c.Exists(ctx, qk, xk).Val(); n != 0 {
			t.Errorf("key %q: %d queue keys left once the queue is empty", k, n)
		}
	}
}

// A queue whose waiters all died (nobody refreshes, nobody acquires) vanishes
// from Redis by itself, and dead waiters stop counting after their TTL.
func TestQueueAbandonedVanishes(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 20*time.Second)
	a := req("k", token(t), "A", 10*time.Second)
	if _, err := s.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	leasetest.Queued(t, ctx, s, req("k", token(t), "short", 200*time.Millisecond), 0)
	leasetest.Queued(t, ctx, s, req("k", token(t), "long", 600*time.Millisecond), 1)
	time.Sleep(400 * time.Millisecond)
	// The short entry expired: only the long one is ahead.
	leasetest.Queued(t, ctx, s, req("k", token(t), "probe", 200*time.Millisecond), 1)
	qk, xk := queueKey(s.Prefix(), "k"), queueExpiryKey(s.Prefix(), "k")
	deadline := time.Now().Add(10 * time.Second)
	for c.Exists(ctx, qk, xk).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("abandoned queue still in Redis: %v", c.ZRange(ctx, qk, 0, -1).Val())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The holder is unaffected; a newcomer queues first.
	leasetest.Queued(t, ctx, s, req("k", token(t), "new", time.Second), 0)
}

// A free key with live waiters is refused without Request.Queue too (the
// caller is not queued), with no holder in the error.
func TestQueueReservedFreeKey(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 20*time.Second)
	a := req("k", token(t), "A", 10*time.Second)
	g, err := s.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	b := req("k", token(t), "B", 10*time.Second)
	leasetest.Queued(t, ctx, s, b, 0)
	if err := s.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	_, err = s.Acquire(ctx, req("k", token(t), "try", 10*time.Second))
	var he *lease.HeldError
	if !errors.As(err, &he) || he.Queued != 1 || he.Holder != "" || he.Fence != 0 || he.Remaining != 0 {
		t.Fatalf("Acquire of a free key reserved for B = %#v, want a HeldError with Queued 1 only", err)
	}
	if n := c.ZCard(ctx, queueKey(s.Prefix(), "k")).Val(); n != 1 {
		t.Errorf("queue length %d after an Acquire without Queue, want 1", n)
	}
	if info, err := s.Inspect(ctx, "k"); err != nil || info.Held || info.Fence != g.Fence {
		t.Errorf("Inspect of the reserved key = %+v, %v", info, err)
	}
	// B is granted; its idempotent retry keeps the lease and the fence.
	b.Queue = true
	gb, err := s.Acquire(ctx, b)
	if err != nil || gb.Fence <= g.Fence {
		t.Fatalf("B's Acquire = %+v, %v", gb, err)
	}
	if again, err := s.Acquire(ctx, b); err != nil || again.Fence != gb.Fence {
		t.Errorf("B's retried Acquire = %+v, %v; want fence %d", again, err, gb.Fence)
	}
}

// Arrival order never goes back, even if the server clock does: a waiter is
// placed after the last one whatever the clock says. Simulated by an entry
// whose arrival score lies far in the future.
func TestQueueArrivalMonotonic(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	p := s.Prefix()
	ctx := testCtx(t, 20*time.Second)
	a := req("k", token(t), "A", 10*time.Second)
	if _, err := s.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	future := float64(time.Now().Add(time.Hour).UnixMicro())
	exp := serverMillis(t, ctx, c) + 10000
	if err := errors.Join(
		c.ZAdd(ctx, queueKey(p, "k"), redis.Z{Score: future, Member: "ahead-of-the-clock"}).Err(),
		c.ZAdd(ctx, queueExpiryKey(p, "k"), redis.Z{Score: exp, Member: "ahead-of-the-clock"}).Err(),
	); err != nil {
		t.Fatal(err)
	}
	var rs []lease.Request
	for i := range 20 { // back to back: several may share a microsecond
		r := req("k", token(t), "w", 10*time.Second)
		leasetest.Queued(t, ctx, s, r, i+1)
		rs = append(rs, r)
	}
	for i, r := range rs {
		leasetest.Queued(t, ctx, s, r, i+1) // refreshes keep every place
	}
	q, _ := queueEntries(t, ctx, c, p, "k")
	if len(q) != 21 || q[0].Member != "ahead-of-the-clock" {
		t.Fatalf("queue %v", q)
	}
	for i := 1; i < len(q); i++ {
		if q[i].Member != rs[i-1].Token || q[i].Score <= q[i-1].Score {
			t.Errorf("queue[%d] = %v after %v, want %s with a larger score", i, q[i], q[i-1], rs[i-1].Token)
		}
	}
}

// A waiter giving up announces the key only if it is free: the next waiter
// then looks again. While the key is held, the holder's release announces it.
func TestQueueGiveUpAnnounces(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	other := storeWithPrefix(t, newClient(t, c.Options().Addr), s.Prefix())
	ctx := testCtx(t, 20*time.Second)
	sub := subscribe(t, s)
	a := req("k", token(t), "A", 10*time.Second)
	if _, err := other.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	b, w, d := req("k", token(t), "B", 10*time.Second), req("k", token(t), "C", 10*time.Second), req("k", token(t), "D", 10*time.Second)
	leasetest.Queued(t, ctx, other, b, 0)
	leasetest.Queued(t, ctx, other, w, 1)
	leasetest.Queued(t, ctx, other, d, 2)
	// D gives up while A holds the key: no announcement (checked below: the
	// next message is A's release).
	if err := other.Release(ctx, d); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("D's Release = %v, want ErrNotHeld", err)
	}
	if err := other.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, err := next(t, ctx, sub, 10*time.Second); err != nil || got != "k" {
		t.Fatalf("Next = %q, %v; want A's release", got, err)
	}
	// B gives up while the key is free: announced, and C is first now.
	if err := other.Release(ctx, b); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("B's Release = %v, want ErrNotHeld", err)
	}
	if got, err := next(t, ctx, sub, 10*time.Second); err != nil || got != "k" {
		t.Fatalf("Next = %q, %v; want B's give-up", got, err)
	}
	// A Release of a token that is neither holder nor queued announces
	// nothing (the next message is the marker key's release).
	if err := other.Release(ctx, req("k", token(t), "nobody", time.Second)); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("stranger's Release = %v, want ErrNotHeld", err)
	}
	m := req("marker", token(t), "M", 10*time.Second)
	if _, err := other.Acquire(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := other.Release(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, err := next(t, ctx, sub, 10*time.Second); err != nil || got != "marker" {
		t.Fatalf("Next = %q, %v; want marker", got, err)
	}
	w.Queue = true
	if _, err := other.Acquire(ctx, w); err != nil {
		t.Fatalf("C's Acquire, first after B gave up: %v", err)
	}
}
