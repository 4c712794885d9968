// docs/SECURITY.md item 2: an announcement only wakes. A client whose ACL user
// may only read keys and PUBLISH reads the first waiter's token from the
// queue and announces a release naming it (also in the old hand-off format,
// with the largest fence): neither the waiter's Store nor a waiting
// lease.Client is granted anything until the holder really releases.

package redislease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/redislease"
	"github.com/redis/go-redis/v9"
)

func TestForgedHandOffGrantsNothing(t *testing.T) {
	admin := sharedClient(t)
	ctx := testCtx(t, 30*time.Second)
	forger := publishOnlyClient(t, ctx, admin)
	holder := newStore(t, admin)
	waiters, err := redislease.New(newClient(t, admin.Options().Addr), redislease.WithPrefix(holder.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := waiters.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	forge := func(key string) string {
		t.Helper()
		head := forger.ZRange(ctx, leaseKey(holder.Prefix(), key)+":q", 0, 0).Val()
		if len(head) != 1 || forger.Set(ctx, leaseKey(holder.Prefix(), key), head[0], 0).Err() == nil {
			t.Fatalf("the forger read the queue %v, or could write", head)
		}
		for _, msg := range []string{key + "\x00" + head[0], key + "\x00" + head[0] + "\x00" + "18446744073709551615"} {
			forger.Publish(ctx, holder.Prefix()+"released", msg)
		}
		return head[0]
	}

	// The Store: the forged announcement arrives and wakes, but grants nothing.
	a, b := req("k", token(t), "A", time.Minute), req("k", token(t), "B", time.Minute)
	if _, err := holder.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	b.Queue = true
	if _, err := waiters.Acquire(ctx, b); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("B's queued Acquire = %v, want ErrHeld", err)
	}
	if got := forge("k"); got != b.Token {
		t.Fatalf("queue head %q, want B", got)
	}
	if an, err := sub.Next(ctx); err != nil || an.Key != "k" || an.Next != b.Token {
		t.Fatalf("Next = %+v, %v; want the forged announcement", an, err)
	}
	var he *lease.HeldError
	if _, err := waiters.Acquire(ctx, b); !errors.As(err, &he) || he.Holder != "A" {
		t.Fatalf("B's Acquire after the forged announcement = %v, want held by A", err)
	}

	// A waiting lease.Client: still waiting after the forgery, granted with
	// the server's fence after the real release.
	c, err1 := lease.New(waiters, lease.WithTTL(time.Minute))
	x := req("x", token(t), "A", time.Minute)
	gx, err2 := holder.Acquire(ctx, x)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := c.Acquire(ctx, "x")
		if err != nil {
			t.Errorf("the Client's Acquire: %v", err)
		}
		got <- l
	}()
	for {
		if n, _ := admin.ZCard(ctx, leaseKey(holder.Prefix(), "x")+":q").Result(); n == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the Client never queued")
		}
		time.Sleep(10 * time.Millisecond)
	}
	forge("x")
	select {
	case <-got:
		t.Fatal("the Client acquired a key its holder still holds")
	case <-time.After(time.Second):
	}
	if err := holder.Release(ctx, x); err != nil {
		t.Fatal(err)
	}
	if l := <-got; l == nil || l.Fence() <= gx.Fence || l.Fence() > 1<<53 {
		t.Fatalf("the Client's lease after the release: %v, want a server fence above %d", l, gx.Fence)
	}
}

// publishOnlyClient returns a client logged in as a new ACL user that may
// read keys and PUBLISH, and nothing else; the user is deleted at cleanup.
func publishOnlyClient(t *testing.T, ctx context.Context, admin *redis.Client) *redis.Client {
	t.Helper()
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
