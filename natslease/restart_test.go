// A private server killed with SIGKILL and restarted on its store: held
// leases, fences and expiry carry over.

package natslease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// TestServerRestart: a lease renewed by a Client outlives a restart shorter
// than its TTL; a hold nobody renews expires by its TTL from its last write
// (server time), not from the restart; fences keep growing.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx := testCtx(t, time.Minute)
	_, js := connect(t, srv.url, nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
	s := newStore(t, js, "restart")
	const ttl = 5 * time.Second
	c, err := lease.New(s, lease.WithTTL(ttl), lease.WithHolder("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	orphan := req("orphan", "gone", 2*time.Second) // acquired, never renewed
	g, err := s.Acquire(ctx, orphan)
	if err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()

	srv.kill()
	time.Sleep(300 * time.Millisecond)
	srv.start()
	t.Logf("restarted %v after the orphan's grant", time.Since(acquired).Round(time.Millisecond))

	// The orphan expires 2s after its grant, by the server's clock.
	var after time.Time
	for after.IsZero() {
		info, err := s.Inspect(ctx, orphan.Key)
		switch {
		case err != nil:
			t.Logf("Inspect while reconnecting: %v", err)
		case !info.Held:
			after = time.Now()
		case info.Fence != g.Fence:
			t.Fatalf("Inspect(orphan) = %+v, want fence %d", info, g.Fence)
		}
		if time.Since(acquired) > 10*time.Second {
			t.Fatalf("the orphan was still held %v after its 2s grant", time.Since(acquired))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := after.Sub(acquired); d < 2*time.Second-100*time.Millisecond {
		t.Errorf("the orphan was free %v after its grant, before its TTL", d)
	}
	g2, err := s.Acquire(ctx, req(orphan.Key, "b", time.Second))
	if err != nil || g2.Fence <= g.Fence || g2.Fence <= l.Fence() {
		t.Errorf("Acquire after the restart = %+v, %v; want a fence above %d and %d", g2, err, g.Fence, l.Fence())
	}

	// The renewed lease is intact two TTLs after the restart.
	time.Sleep(ttl)
	if err := l.Err(); err != nil {
		t.Fatalf("the renewed lease after the restart: %v", err)
	}
	info, err := s.Inspect(ctx, "held")
	if err != nil || !info.Held || info.Fence != l.Fence() || info.Remaining < ttl/2 {
		t.Errorf("Inspect(held) = %+v, %v; want held with fence %d, renewed", info, err, l.Fence())
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release after the restart: %v", err)
	}
	if err := s.Renew(ctx, orphan); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("the orphan's Renew after its expiry = %v, want ErrNotHeld", err)
	}
}

// TestWatchAfterRestart: the subscription goes on after a restart (its
// ordered consumer is recreated) or ends with an error, never hangs; the
// test reports how long announcements were lost.
func TestWatchAfterRestart(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx := testCtx(t, time.Minute)
	_, js := connect(t, srv.url, nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
	s := newStore(t, js, "watch")
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	srv.kill()
	srv.start()
	restarted := time.Now()
	for i := 0; ; i++ {
		r := req("k", "a", time.Second)
		if _, err := s.Acquire(ctx, r); err == nil {
			if err := s.Release(ctx, r); err != nil {
				t.Logf("Release: %v", err)
			}
		}
		nctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		a, err := sub.Next(nctx)
		cancel()
		switch {
		case err == nil && a == (driver.Announcement{Key: "k"}):
			t.Logf("announced again %v after the restart", time.Since(restarted).Round(time.Millisecond))
			return
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			t.Logf("the subscription ended %v after the restart: %v", time.Since(restarted).Round(time.Millisecond), err)
			return
		case time.Since(restarted) > 30*time.Second:
			t.Fatalf("no announcement and no error 30s after the restart")
		}
	}
}
