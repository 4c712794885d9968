// Hand-off: a release gives the key to the first waiter whose store listens
// and wakes it with an announcement on that store's own channel alone; the
// waiter takes the key with its own Acquire (the shared suite, handofftest).
// A forged announcement grants nothing.

package redislease_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/handofftest"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/redislease"
)

// handOffPair returns a store and a second store of the same namespace on
// its own client, which counts its requests.
func handOffPair(t *testing.T) (*redislease.Store, *redislease.Store, *countHook) {
	c := sharedClient(t)
	sA := newStore(t, c)
	cB := newClient(t, c.Options().Addr)
	hook := &countHook{}
	cB.AddHook(hook)
	return sA, storeWithPrefix(t, cB, sA.Prefix()), hook
}

// handOffHarness makes handOffPairs for the shared suite.
var handOffHarness = handofftest.Harness{
	Pair: func(t *testing.T) (lease.Store, lease.Store, func() int) {
		sA, sB, hook := handOffPair(t)
		return sA, sB, func() int {
			hook.mu.Lock()
			defer hook.mu.Unlock()
			return len(hook.singles) + len(hook.pipelines)
		}
	},
}

// TestHandOff runs the shared hand-off suite.
func TestHandOff(t *testing.T) { handofftest.Run(t, handOffHarness) }

// TestForgedHandOffGrantsNothing: a client whose ACL user may only read and
// PUBLISH reads the token first in a key's queue and its store's identifier
// (from the queue details, written when that store listens), and publishes
// on that store's own channel the announcement of a hand-off to it with the
// largest fence. The waiter is granted nothing, through the Store or a
// lease.Client: the key stays its holder's, and the waiter gets it, with the
// server's fence, only after the real release (handofftest.Forged).
func TestForgedHandOffGrantsNothing(t *testing.T) {
	forgers := make(map[*testing.T]*redis.Client) // one ACL user per subtest
	handofftest.Forged(t, handOffHarness, func(t *testing.T, ctx context.Context, waiters lease.Store, key string, fence uint64) string {
		s := waiters.(*redislease.Store)
		forger, ok := forgers[t]
		if !ok {
			forger = publishOnlyClient(t, ctx)
			forgers[t] = forger
		}
		head, err := forger.ZRange(ctx, queueKey(s.Prefix(), key), 0, 0).Result()
		if err != nil {
			t.Fatalf("the forger reads the queue: %v", err)
		}
		if len(head) == 0 {
			return ""
		}
		// The queue details name the waiter's store: "ttl-ms:store-id:holder".
		details, err := forger.HGet(ctx, leaseKey(s.Prefix(), key)+":qd", head[0]).Result()
		if errors.Is(err, redis.Nil) {
			return "" // its store does not listen (yet)
		}
		if err != nil {
			t.Fatalf("the forger reads the queue details: %v", err)
		}
		parts := strings.SplitN(details, ":", 3)
		if len(parts) != 3 {
			t.Fatalf("queue details %q", details)
		}
		// The forger cannot write: the ACL holds.
		if err := forger.Set(ctx, leaseKey(s.Prefix(), key), head[0], 0).Err(); err == nil {
			t.Fatal("the publish-only user could SET")
		}
		msg := key + "\x00" + head[0] + "\x00" + strconv.FormatUint(fence, 10)
		if err := forger.Publish(ctx, s.Channel()+":"+parts[1], msg).Err(); err != nil {
			t.Fatalf("the forger publishes: %v", err)
		}
		return head[0]
	})
}

// publishOnlyClient returns a client of the shared server logged in as a new
// ACL user that may read keys and PUBLISH, and nothing else; the user is
// deleted when the test ends.
func publishOnlyClient(t *testing.T, ctx context.Context) *redis.Client {
	t.Helper()
	admin := sharedClient(t)
	user, pass := "leasekit-forger-"+randHex(t, 4), randHex(t, 16)
	if err := admin.Do(ctx, "ACL", "SETUSER", user, "reset", "on", ">"+pass, "~*", "&*",
		"+@read", "+@connection", "+publish").Err(); err != nil {
		t.Skipf("cannot create an ACL user (Redis 6 or later, ACL allowed): %v", err)
	}
	t.Cleanup(func() {
		if err := admin.Do(context.Background(), "ACL", "DELUSER", user).Err(); err != nil {
			t.Errorf("ACL DELUSER %s: %v", user, err)
		}
	})
	c := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: user, Password: pass})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("log in as %s: %v", user, err)
	}
	return c
}

// TestHandOffOwnChannel: a hand-off is published to the waiter's store
// alone: another client's subscription of the namespace hears the next
// release on the namespace's channel first.
func TestHandOffOwnChannel(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	sub := handofftest.Subscribe(t, sB)
	subA := handofftest.Subscribe(t, sA)
	ttl := 10 * time.Second
	a, b := req("k", token(t), "A", ttl), req("k", token(t), "B", ttl)
	handofftest.ReleaseTo(t, ctx, sA, sB, a, b)
	if an := handofftest.Announcement(t, ctx, sub); an.Key != "k" || an.Next != b.Token {
		t.Fatalf("B's store heard %+v, want key k with B next", an)
	}
	m := req("marker", token(t), "M", ttl)
	if _, err := sA.Acquire(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := sA.Release(ctx, m); err != nil {
		t.Fatal(err)
	}
	if an := handofftest.Announcement(t, ctx, subA); an.Key != "marker" {
		t.Fatalf("A's subscription heard %+v first, want the marker's release", an)
	}
}

// TestHandOffFenceCounterAboveClock: a hand-off's fence follows the counter
// when it is ahead of the server clock, as an acquisition's does.
func TestHandOffFenceCounterAboveClock(t *testing.T) {
	sA, sB, _ := handOffPair(t)
	ctx := testCtx(t, 30*time.Second)
	handofftest.Subscribe(t, sB)
	ttl := 10 * time.Second
	a, b := req("k", token(t), "A", ttl), req("k", token(t), "B", ttl)
	if _, err := sA.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	leasetest.Queued(t, ctx, sB, b, 0)
	c := sharedClient(t)
	const high = 9000000000000000
	if err := c.Set(ctx, fenceKey(sA.Prefix(), "k"), high, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := sA.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if f := handofftest.HeldBy(t, ctx, sA, "k", "B"); f != high+1 {
		t.Errorf("handed fence %d, want counter+1 = %d", f, uint64(high+1))
	}
}
