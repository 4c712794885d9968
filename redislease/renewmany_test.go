// RenewMany on a single node renews many leases per EVALSHA, all in one
// pipeline, with one result per lease.

package redislease_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// TestRenewManyChunks: 2,500 leases (held, never held, broken, shared, and
// one whose tombstones' key Redis cannot read) take one pipeline of three EVALSHAs;
// each lease gets its own result, a failing one stops only itself, and the
// batch survives Redis losing its scripts.
func TestRenewManyChunks(t *testing.T) {
	c := newClient(t, startRedis(t).Addr()) // private: commandstats, SCRIPT FLUSH
	s := newStore(t, c)
	ctx := testCtx(t, time.Minute)
	const n, bad = 2500, 1235 // bad: never held
	rs := make([]driver.Request, n)
	for i := range rs {
		rs[i] = req(fmt.Sprintf("k%d", i), token(t), "h", 10*time.Second)
		rs[i].Shared = i%5 == 2
	}
	_, errs := s.AcquireMany(ctx, rs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 5 {
		rs[i].Token = token(t) // never held
		if _, err := s.Break(ctx, rs[i+1].Key); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, leaseKey(s.Prefix(), rs[bad].Key)+":b", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	check := func(round int) {
		t.Helper()
		for i := range rs {
			rs[i].TTL = time.Duration(20+round) * time.Minute
		}
		before := commandStats(t, ctx, c)["evalsha"]
		hook := &countHook{}
		c.AddHook(hook)
		errs := s.RenewMany(ctx, rs)
		singles, pipelines := hook.singles.Load(), hook.pipelines.Load()
		if calls := commandStats(t, ctx, c)["evalsha"] - before; round == 1 && (singles != 0 || pipelines != 1 || calls != 3) {
			t.Errorf("RenewMany of %d leases sent %d commands, %d pipelines and %d EVALSHAs, want 0, 1 and 3", n, singles, pipelines, calls)
		}
		for i, err := range errs {
			var want error
			switch {
			case i == bad:
				if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || errors.Is(err, lease.ErrNotHeld) {
					t.Errorf("round %d: renewal beside the unreadable key: %v, want WRONGTYPE", round, err)
				}
				continue
			case i%5 == 0:
				want = lease.ErrNotHeld
			case i%5 == 1:
				want = lease.ErrBroken
			}
			if !errors.Is(err, want) || (err == nil) != (want == nil) {
				t.Fatalf("round %d: renewal %d (%q) = %v, want %v", round, i, rs[i].Key, err, want)
			}
			if want != nil || i%100 != 3 && i%100 != 7 {
				continue
			}
			if info, err := s.Inspect(ctx, rs[i].Key); err != nil || info.Remaining < rs[i].TTL-time.Minute || info.Shared != rs[i].Shared {
				t.Fatalf("round %d: Inspect(%q) after renewing it for %v = %+v, %v", round, rs[i].Key, rs[i].TTL, info, err)
			}
		}
	}
	check(0) // loads the script
	check(1)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	check(2)
}

// TestRenewManyCrossSlot: a plain client of a one-node Cluster, which
// refuses a script over keys of several slots (CROSSSLOT), still renews each
// lease, one EVALSHA each.
func TestRenewManyCrossSlot(t *testing.T) {
	ports := freePorts(t, 2)
	srv := startRedisOn(t, ports[0], "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(ports[1]))
	c := newClient(t, srv.Addr())
	ctx := testCtx(t, time.Minute)
	if err := c.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
	}
	for !strings.Contains(c.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if ctx.Err() != nil {
			t.Fatal("cluster not ready in a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s := newStore(t, c)
	rs := make([]driver.Request, 10)
	for i := range rs {
		rs[i] = req(fmt.Sprintf("k%d", i), token(t), "h", 10*time.Second)
	}
	if _, errs := s.AcquireMany(ctx, rs[1:]); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	for i, err := range s.RenewMany(ctx, rs) {
		if i == 0 && !errors.Is(err, lease.ErrNotHeld) || i > 0 && err != nil {
			t.Errorf("renewal %d = %v", i, err)
		}
	}
}
