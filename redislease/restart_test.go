// A Redis restart without persistence loses leases and fence counters;
// fences must still grow (the server clock) and the store must recover its
// scripts (NOSCRIPT) on its own.

package redislease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

func TestRestartWithoutPersistence(t *testing.T) {
	t.Parallel() // private servers; after the conformance suite, whose leak check sees the whole process
	srv := startRedis(t)
	c := newClient(t, srv.Addr())
	s := newStore(t, c)
	ctx := testCtx(t, 60*time.Second)

	job := req("job", token(t), "before", time.Minute)
	other := req("other", token(t), "before", time.Minute)
	g1, err := s.Acquire(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, other); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Inspect(ctx, "job"); err != nil || !info.Held || info.Fence != g1.Fence {
		t.Fatalf("before restart: %+v, %v", info, err)
	}

	srv.kill() // no persistence: everything is lost
	srv.start()
	admin := newClient(t, srv.Addr())

	// First use after the restart is a batch renewal: the connection pool
	// holds dead connections and the script cache is empty (NOSCRIPT).
	errs := s.RenewMany(ctx, []driver.Request{job, other})
	for i, err := range errs {
		if !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("RenewMany[%d] after restart = %v, want ErrNotHeld", i, err)
		}
	}
	if err := s.Renew(ctx, job); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew after restart = %v, want ErrNotHeld", err)
	}
	// The counter is gone too: only the clock is left to order fences.
	info, err := s.Inspect(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if info.Held || info.Fence != 0 {
		t.Fatalf("after restart Inspect = %+v, want free and no counter", info)
	}
	g2, err := s.Acquire(ctx, req("job", token(t), "after", time.Minute))
	if err != nil {
		t.Fatalf("Acquire after restart: %v", err)
	}
	if g2.Fence <= g1.Fence {
		t.Fatalf("fence after restart %d, want > %d", g2.Fence, g1.Fence)
	}
	if err := s.Release(ctx, job); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Release by the pre-restart holder = %v, want ErrNotHeld", err)
	}
	// A counter ahead of the clock (the clock went back) still orders fences.
	admin.Set(ctx, leaseKey(s.Prefix(), "other")+":fence", 1<<52, 0)
	if g, err := s.Acquire(ctx, req("other", token(t), "after", time.Minute)); err != nil || g.Fence != 1<<52+1 {
		t.Errorf("Acquire with the counter at 2^52 = %+v, %v; want fence 2^52+1", g, err)
	}
	// The batch found no cached script and loaded it; Acquire fell back to EVAL.
	if stats := commandStats(t, ctx, admin); stats["script|load"] < 1 || stats["eval"] < 1 {
		t.Errorf("expected SCRIPT LOAD (RenewMany) and EVAL (Acquire fallback) after the restart, got %v", stats)
	}
}
