// Store-level tests against the Redis at LEASE_TEST_REDIS_ADDR.

package redislease_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/redislease"
	"github.com/redis/go-redis/v9"
)

func TestCRC16Vector(t *testing.T) {
	// Test vectors from the Redis Cluster specification.
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	if a, b := hashSlot("{user1000}.following"), hashSlot("{user1000}.followers"); a != b {
		t.Fatalf("hash tags not honoured: %d != %d", a, b)
	}
}

func TestNewValidation(t *testing.T) {
	if _, err := redislease.New(nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, p := range []string{"a{", "}b", "{x}:"} {
		if _, err := redislease.New(c, redislease.WithPrefix(p)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("New(prefix %q) = %v, want ErrInvalid", p, err)
		}
	}
	s, err := redislease.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if s.Prefix() != redislease.DefaultPrefix || s.Channel() != "lease:released" {
		t.Errorf("defaults: prefix %q channel %q", s.Prefix(), s.Channel())
	}
	lim := s.Limits()
	if lim.MaxKeyLen != 512 || lim.MinTTL != time.Millisecond || lim.MaxTTL != 0 {
		t.Errorf("Limits() = %+v", lim)
	}
}

// Invalid input is rejected before any round trip: the client points at a
// closed port, so a round trip would fail with a connection error instead.
func TestInvalidRequests(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	s, err := redislease.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	long := strings.Repeat("k", redislease.MaxKeyLen+1)
	bad := []lease.Request{
		req("", "tok", "h", time.Second),
		req(long, "tok", "h", time.Second),
		req("k", "", "h", time.Second),
		req("k", "tok", "h", 0),
		req("k", "tok", "h", -time.Second),
	}
	for i, r := range bad {
		if _, err := s.Acquire(ctx, r); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Acquire(bad[%d]) = %v, want ErrInvalid", i, err)
		}
		if err := s.Renew(ctx, r); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Renew(bad[%d]) = %v, want ErrInvalid", i, err)
		}
		if i < 3 { // Release needs no TTL
			if err := s.Release(ctx, r); !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("Release(bad[%d]) = %v, want ErrInvalid", i, err)
			}
		}
	}
	errs := s.RenewMany(ctx, bad)
	for i, err := range errs {
		if !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("RenewMany[%d] = %v, want ErrInvalid", i, err)
		}
	}
	if _, err := s.Inspect(ctx, ""); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Inspect(\"\") = %v, want ErrInvalid", err)
	}
	// A valid request does reach the (absent) server: a transient error.
	if _, err := s.Acquire(ctx, req("k", "tok", "h", time.Second)); err == nil ||
		errors.Is(err, lease.ErrInvalid) || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Acquire with the server down = %v, want a transient error", err)
	}
}

func TestAcquireHeld(t *testing.T) {
	s := newStore(t, sharedClient(t))
	ctx := testCtx(t, 10*time.Second)
	g, err := s.Acquire(ctx, req("job", token(t), "host-a:1", 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if g.Fence == 0 || g.Lost != nil {
		t.Fatalf("grant = %+v", g)
	}
	_, err = s.Acquire(ctx, req("job", token(t), "host-b:2", 5*time.Second))
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second Acquire = %v, want ErrHeld", err)
	}
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("error %T is not a *HeldError", err)
	}
	if he.Key != "job" || he.Holder != "host-a:1" || he.Fence != g.Fence {
		t.Errorf("HeldError = %+v, want key job, holder host-a:1, fence %d", he, g.Fence)
	}
	if he.Remaining <= 0 || he.Remaining > 5*time.Second {
		t.Errorf("HeldError.Remaining = %v, want in (0, 5s]", he.Remaining)
	}
}

func TestAcquireIdempotent(t *testing.T) {
	s := newStore(t, sharedClient(t))
	ctx := testCtx(t, 10*time.Second)
	tok := token(t)
	g1, err := s.Acquire(ctx, req("k", tok, "h", time.Second))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := s.Acquire(ctx, req("k", tok, "h", 30*time.Second))
	if err != nil {
		t.Fatalf("re-acquire by the holder: %v", err)
	}
	if g2.Fence != g1.Fence {
		t.Errorf("re-acquire fence %d, want the same %d", g2.Fence, g1.Fence)
	}
	info, err := s.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Remaining < 20*time.Second {
		t.Errorf("after re-acquire with 30s: %+v, want the TTL refreshed", info)
	}
}

func TestRenewExtends(t *testing.T) {
	s := newStore(t, sharedClient(t))
	ctx := testCtx(t, 10*time.Second)
	r := req("k", token(t), "h", 300*time.Millisecond)
	g, err := s.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	r.TTL = 30 * time.Second
	if err := s.Renew(ctx, r); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	time.Sleep(600 * time.Millisecond) // past the first TTL
	info, err := s.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Fence != g.Fence || info.Remaining < 20*time.Second || info.Remaining > 30*time.Second {
		t.Errorf("after renew: %+v, want held with fence %d and ~30s left", info, g.Fence)
	}
	// Renew can also shorten the TTL.
	r.TTL = 2 * time.Second
	if err := s.Renew(ctx, r); err != nil {
		t.Fatal(err)
	}
	if info, err = s.Inspect(ctx, "k"); err != nil || info.Remaining > 2*time.Second || info.Remaining <= 0 {
		t.Errorf("after renew to 2s: %+v, %v", info, err)
	}
}

func TestForeignToken(t *testing.T) {
	s := newStore(t, sharedClient(t))
	ctx := testCtx(t, 10*time.Second)
	g, err := s.Acquire(ctx, req("k", token(t), "owner", 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	other := req("k", token(t), "thief", 10*time.Second)
	if err := s.Renew(ctx, other); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("foreign Renew = %v, want ErrNotHeld", err)
	}
	if err := s.Release(ctx, other); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("foreign Release = %v, want ErrNotHeld", err)
	}
	info, err := s.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Holder != "owner" || info.Fence != g.Fence {
		t.Errorf("holder disturbed: %+v", info)
	}
	// Never-held keys.
	never := req("never", token(t), "h", time.Second)
	if err := s.Renew(ctx, never); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew of a free key = %v, want ErrNotHeld", err)
	}
	if err := s.Release(ctx, never); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Release of a free key = %v, want ErrNotHeld", err)
	}
	if err := s.Renew(ctx, never); err != nil && !strings.Contains(err.Error(), `"never"`) {
		t.Errorf("error %q does not name the key", err)
	}
}

func TestReleaseFrees(t *testing.T) {
	s := newStore(t, sharedClient(t))
	ctx := testCtx(t, 10*time.Second)
	a := req("k", token(t), "a", 10*time.Second)
	g, err := s.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, a); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("second Release = %v, want ErrNotHeld", err)
	}
	if err := s.Renew(ctx, a); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew after Release = %v, want ErrNotHeld", err)
	}
	g2, err := s.Acquire(ctx, req("k", token(t), "b", 10*time.Second))
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if g2.Fence <= g.Fence {
		t.Errorf("fence %d after %d", g2.Fence, g.Fence)
	}
}

func TestExpiryFrees(t *testing.T) {
	s := newStore(t, sharedClient(t))
	ctx := testCtx(t, 10*time.Second)
	a := req("k", token(t), "a", 50*time.Millisecond)
	g, err := s.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	b := req("k", token(t), "b", 10*time.Second)
	start := time.Now()
	var gb lease.Grant
	for {
		gb, err = s.Acquire(ctx, b)
		if err == nil {
			break
		}
		if !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("Acquire: %v", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("lease with a 50ms TTL still held after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if gb.Fence <= g.Fence {
		t.Errorf("fence after expiry %d, want > %d", gb.Fence, g.Fence)
	}
	if err := s.Renew(ctx, a); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew by the expired holder = %v, want ErrNotHeld", err)
	}
}

func TestFencesIncrease(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	// A second store (another client) on the same namespace, like another process.
	s2 := storeWithPrefix(t, newClient(t, c.Options().Addr), s.Prefix())
	ctx := testCtx(t, 20*time.Second)
	var last uint64
	for i := range 50 {
		st := s
		if i%2 == 1 {
			st = s2
		}
		r := req("k", token(t), "h", 10*time.Second)
		g, err := st.Acquire(ctx, r)
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if g.Fence <= last {
			t.Fatalf("cycle %d: fence %d not above %d", i, g.Fence, last)
		}
		last = g.Fence
		if err := st.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Keys have independent counters, and a free key reports its last fence.
	info, err := s.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if info.Held || info.Fence != last || info.Holder != "" || info.Remaining != 0 {
		t.Errorf("Inspect of the released key = %+v, want free with fence %d", info, last)
	}
}

// The fence counter wins over the clock: fence = max(last+1, TIME in µs),
// whatever the counter's length (the scripts compare decimal text by length
// first; fences stay exact below 2^53, the year 2255 in µs), on the uncontended path and on a grant to a queued waiter; a
// counter that is not a number counts as 0, so the clock wins.
func TestFenceCounterAboveClock(t *testing.T) {
	c := sharedClient(t)
	ctx := testCtx(t, 20*time.Second)
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	us := uint64(now.UnixMicro())
	for _, tc := range []struct {
		name    string
		counter string
		want    uint64 // 0: at least the clock
	}{
		{"same length", fmt.Sprint(us + 1e12), us + 1e12 + 1}, // ~11.6 days ahead
		// The largest the scripts keep exact: Lua numbers are doubles.
		{"near 2^53", "9000000000000000", 9000000000000001},
		{"shorter", "12345", 0},
		{"not a number", "x", 0},
	} {
		for _, queued := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/queued=%v", tc.name, queued), func(t *testing.T) {
				s := newStore(t, c)
				fk := fenceKey(s.Prefix(), "k")
				if err := c.Set(ctx, fk, tc.counter, 0).Err(); err != nil {
					t.Fatal(err)
				}
				r := req("k", token(t), "h", 5*time.Second)
				if queued {
					// A holder, then r queued behind it, then the holder's
					// release: r is granted on the queue's path.
					h := req("k", token(t), "h", 5*time.Second)
					if _, err := s.Acquire(ctx, h); err != nil {
						t.Fatal(err)
					}
					if err := c.Set(ctx, fk, tc.counter, 0).Err(); err != nil {
						t.Fatal(err)
					}
					r.Queue = true
					if _, err := s.Acquire(ctx, r); !errors.Is(err, lease.ErrHeld) {
						t.Fatalf("queueing behind the holder: %v, want ErrHeld", err)
					}
					if err := s.Release(ctx, h); err != nil {
						t.Fatal(err)
					}
				}
				g, err := s.Acquire(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case tc.want != 0 && g.Fence != tc.want:
					t.Errorf("fence %d, want counter+1 = %d", g.Fence, tc.want)
				case tc.want == 0 && g.Fence < us:
					t.Errorf("fence %d, want at least the server clock %d µs", g.Fence, us)
				}
				if v, err := c.Get(ctx, fk).Uint64(); err != nil || v != g.Fence {
					t.Errorf("counter = %d, %v; want %d", v, err, g.Fence)
				}
				if ttl, err := c.PTTL(ctx, fk).Result(); err != nil || ttl != -1 {
					t.Errorf("counter PTTL = %v, %v; want no expiry", ttl, err)
				}
				if info, err := s.Inspect(ctx, "k"); err != nil || info.Fence != g.Fence {
					t.Errorf("Inspect = %+v, %v; want fence %d", info, err, g.Fence)
				}
			})
		}
	}
}

// When the counter is gone (as after a restart without persistence), the
// server clock keeps the fence above every earlier one.
func TestFenceClockWhenCounterLost(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 10*time.Second)
	before, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	r := req("k", token(t), "h", 10*time.Second)
	g1, err := s.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if g1.Fence < uint64(before.UnixMicro()) {
		t.Errorf("fence %d below the server clock %d µs", g1.Fence, before.UnixMicro())
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Del(ctx, fenceKey(s.Prefix(), "k")).Result(); err != nil || n != 1 {
		t.Fatalf("DEL counter = %d, %v; want 1 (key layout changed?)", n, err)
	}
	if info, err := s.Inspect(ctx, "k"); err != nil || info.Fence != 0 || info.Held {
		t.Errorf("Inspect without counter = %+v, %v; want free, fence 0", info, err)
	}
	g2, err := s.Acquire(ctx, req("k", token(t), "h", 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if g2.Fence <= g1.Fence {
		t.Errorf("fence after losing the counter %d, want > %d", g2.Fence, g1.Fence)
	}
}

// holderOf is the holder TestKeyLayout gives key k: "h:" and k, cut to fit
// lease.MaxHolderLen.
func holderOf(k string) string { return ("h:" + k)[:min(len(k)+2, lease.MaxHolderLen)] }

// Every key maps to a hash, a counter and the two zsets of its queue of
// waiters in one cluster slot, whose hash tag is the escaped key, and distinct
// keys never share Redis keys.
func TestKeyLayout(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 20*time.Second)
	keys := []string{
		"plain", "a{b}c", "{", "}", "{}", "}{", "x{y", "%", "%7B", "%7D", "%25", "{%}",
		"ключ 🔑", "日本語{キー}", "a:b:c", "tab\tnl\n", "\x01\xff",
		strings.Repeat("{}%", redislease.MaxKeyLen/3) + "xy",
	}
	fences := map[string]uint64{}
	waiters := map[string]lease.Request{}
	for _, k := range keys {
		g, err := s.Acquire(ctx, req(k, token(t), holderOf(k), 10*time.Second))
		if err != nil {
			t.Fatalf("Acquire(%q): %v", k, err) // a collision would be ErrHeld
		}
		fences[k] = g.Fence
		w := req(k, token(t), "w", 10*time.Second)
		w.Queue = true
		if _, err := s.Acquire(ctx, w); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("queued Acquire(%q) = %v, want ErrHeld", k, err)
		}
		waiters[k] = w
	}
	for _, k := range keys {
		lk, fk := leaseKey(s.Prefix(), k), fenceKey(s.Prefix(), k)
		qk, xk := queueKey(s.Prefix(), k), queueExpiryKey(s.Prefix(), k)
		if n, err := c.Exists(ctx, lk, fk, qk, xk).Result(); err != nil || n != 4 {
			t.Errorf("key %q: EXISTS %q %q %q %q = %d, %v; want 4", k, lk, fk, qk, xk, n, err)
		}
		for _, rk := range []string{qk, xk} {
			if hashTag(rk) != hashTag(lk) || hashSlot(rk) != hashSlot(lk) {
				t.Errorf("key %q: queue key %q has hash tag %q, want %q", k, rk, hashTag(rk), hashTag(lk))
			}
			if q := c.ZRange(ctx, rk, 0, -1).Val(); len(q) != 1 || q[0] != waiters[k].Token {
				t.Errorf("key %q: %q holds %v, want the waiter's token", k, rk, q)
			}
		}
		if typ := c.Type(ctx, lk).Val(); typ != "string" {
			t.Errorf("key %q: lease key type %q, want string", k, typ)
		}
		tag := hashTag(lk)
		if tag == "" || tag != hashTag(fk) || tag != escaper.Replace(k) {
			t.Errorf("key %q: hash tags %q / %q, want the escaped key", k, tag, hashTag(fk))
		}
		if hashSlot(lk) != hashSlot(fk) {
			t.Errorf("key %q: slots %d != %d", k, hashSlot(lk), hashSlot(fk))
		}
		v, err := c.Get(ctx, lk).Result()
		tok, fence, holder := splitLease(v)
		if err != nil || holder != holderOf(k) || fence != strconv.FormatUint(fences[k], 10) || len(tok) != 32 {
			t.Errorf("key %q: lease %q, %v; want token NUL fence NUL holder", k, v, err)
		}
		info, err := s.Inspect(ctx, k)
		if err != nil || !info.Held || info.Key != k || info.Holder != holderOf(k) || info.Fence != fences[k] {
			t.Errorf("Inspect(%q) = %+v, %v", k, info, err)
		}
	}
	var n int
	iter := c.Scan(ctx, 0, escapeGlob(s.Prefix())+"*", 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	if err := iter.Err(); err != nil || n != 4*len(keys) {
		t.Errorf("%d Redis keys under the prefix (err %v), want %d", n, err, 4*len(keys))
	}
	// Once the waiters leave, only leases and counters remain.
	for _, k := range keys {
		if err := s.Release(ctx, waiters[k]); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("waiter's Release(%q) = %v, want ErrNotHeld", k, err)
		}
	}
	n = 0
	iter = c.Scan(ctx, 0, escapeGlob(s.Prefix())+"*", 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	if err := iter.Err(); err != nil || n != 2*len(keys) {
		t.Errorf("%d Redis keys under the prefix once the waiters left (err %v), want %d", n, err, 2*len(keys))
	}
}

func TestInspect(t *testing.T) {
	s := newStore(t, sharedClient(t))
	ctx := testCtx(t, 10*time.Second)
	info, err := s.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if info != (lease.Info{Key: "k"}) {
		t.Errorf("Inspect of a never-used key = %+v", info)
	}
	r := req("k", token(t), "worker-7", 10*time.Second)
	g, err := s.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	info, err = s.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Key != "k" || info.Holder != "worker-7" || info.Fence != g.Fence ||
		info.Remaining <= 5*time.Second || info.Remaining > 10*time.Second {
		t.Errorf("Inspect of a held key = %+v (fence %d)", info, g.Fence)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	info, err = s.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if info != (lease.Info{Key: "k", Fence: g.Fence}) {
		t.Errorf("Inspect of a released key = %+v, want free with the last fence %d", info, g.Fence)
	}
}

func TestRenewMany(t *testing.T) {
	s := newStore(t, sharedClient(t))
	ctx := testCtx(t, 10*time.Second)
	if errs := s.RenewMany(ctx, nil); len(errs) != 0 {
		t.Errorf("RenewMany(nil) = %v", errs)
	}
	var rs []lease.Request
	held := map[int]bool{}
	for i := range 6 {
		r := req("held-"+string(rune('a'+i)), token(t), "h", 500*time.Millisecond)
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
		r.TTL = 30 * time.Second
		held[len(rs)] = true
		rs = append(rs, r)
		switch i {
		case 1: // a foreign token on a held key
			rs = append(rs, req(r.Key, token(t), "x", 30*time.Second))
		case 3: // a never-held key
			rs = append(rs, req("never", token(t), "x", 30*time.Second))
		case 4: // invalid
			rs = append(rs, req("", token(t), "x", 30*time.Second))
		}
	}
	errs := s.RenewMany(ctx, rs)
	if len(errs) != len(rs) {
		t.Fatalf("%d errors for %d requests", len(errs), len(rs))
	}
	for i, err := range errs {
		switch {
		case held[i] && err != nil:
			t.Errorf("RenewMany[%d] (%q, held) = %v", i, rs[i].Key, err)
		case !held[i] && rs[i].Key == "" && !errors.Is(err, lease.ErrInvalid):
			t.Errorf("RenewMany[%d] (invalid) = %v, want ErrInvalid", i, err)
		case !held[i] && rs[i].Key != "" && !errors.Is(err, lease.ErrNotHeld):
			t.Errorf("RenewMany[%d] (%q, not held) = %v, want ErrNotHeld", i, rs[i].Key, err)
		}
	}
	time.Sleep(time.Second) // past the original 500ms TTL
	for i, r := range rs {
		if !held[i] {
			continue
		}
		info, err := s.Inspect(ctx, r.Key)
		if err != nil || !info.Held || info.Remaining < 20*time.Second {
			t.Errorf("%q after RenewMany: %+v, %v", r.Key, info, err)
		}
	}
}

// The store does not close the client it was given.
func TestCloseKeepsClient(t *testing.T) {
	c := sharedClient(t)
	s, err := redislease.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(testCtx(t, 5*time.Second)).Err(); err != nil {
		t.Errorf("client unusable after Store.Close: %v", err)
	}
}

// argsHook records the arguments of every EVALSHA the client sends.
type argsHook struct {
	countHook
	args [][]any
}

func (h *argsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.mu.Lock()
			h.args = append(h.args, cmd.Args())
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// TTLs reach PEXPIRE rounded up to whole milliseconds, never down (a TTL
// rounded down could expire before the Client's local deadline).
func TestTTLRoundsUp(t *testing.T) {
	c := newClient(t, sharedClient(t).Options().Addr)
	hook := &argsHook{}
	c.AddHook(hook)
	s := newStore(t, c)
	ctx := testCtx(t, 10*time.Second)
	r := req("k", token(t), "h", time.Minute)
	if _, err := s.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ttl  time.Duration
		want int64
	}{
		{time.Nanosecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + time.Nanosecond, 2},
		{1500*time.Millisecond - time.Nanosecond, 1500},
		{time.Hour, 3600000},
	} {
		hook.mu.Lock()
		hook.args = nil
		hook.mu.Unlock()
		r.TTL = tc.ttl
		err := s.Renew(ctx, r)
		hook.mu.Lock()
		args := hook.args
		hook.mu.Unlock()
		if tc.ttl < 10*time.Millisecond {
			// The lease may already be gone when Renew's reply arrives; only
			// the sent TTL matters here. Re-acquire for the next case.
			if err != nil && !errors.Is(err, lease.ErrNotHeld) {
				t.Fatal(err)
			}
			r.TTL = time.Minute
			if _, err := s.Acquire(ctx, r); err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		if len(args) != 1 {
			t.Fatalf("TTL %v: %d EVALSHA sent, want 1", tc.ttl, len(args))
		}
		if got := fmt.Sprint(args[0][len(args[0])-1]); got != fmt.Sprint(tc.want) {
			t.Errorf("TTL %v sent as %s ms, want %d", tc.ttl, got, tc.want)
		}
	}
	info, err := s.Inspect(ctx, "k")
	if err != nil || !info.Held || info.Remaining > time.Hour || info.Remaining < 59*time.Minute {
		t.Errorf("after renewing to 1h: %+v, %v", info, err)
	}
}
