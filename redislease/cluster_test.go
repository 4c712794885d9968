// The store on a private three-node Redis Cluster: scripts must never touch
// keys of two slots, pipelines span nodes, releases reach every node.

package redislease_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/redis/go-redis/v9"
)

// startCluster starts three masters sharing the 16384 slots and returns
// their addresses once every node reports cluster_state:ok.
func startCluster(t *testing.T) []string {
	t.Helper()
	ports := freePorts(t, 6) // three client ports, three cluster bus ports
	ctx := testCtx(t, 30*time.Second)
	var addrs []string
	var clients []*redis.Client
	for i := range 3 {
		srv := startRedisOn(t, ports[i],
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(ports[3+i]), "--cluster-node-timeout", "5000")
		addrs = append(addrs, srv.Addr())
		c := newClient(t, srv.Addr())
		clients = append(clients, c)
		lo, hi := i*16384/3, (i+1)*16384/3-1
		if err := c.Do(ctx, "cluster", "addslotsrange", lo, hi).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
		}
		if err := c.Do(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
			t.Fatalf("CLUSTER SET-CONFIG-EPOCH: %v", err)
		}
	}
	for i := 1; i < 3; i++ {
		if err := clients[0].Do(ctx, "cluster", "meet", "127.0.0.1", ports[i], ports[3+i]).Err(); err != nil {
			t.Fatalf("CLUSTER MEET: %v", err)
		}
	}
	for {
		ready := true
		for _, c := range clients {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				t.Fatalf("CLUSTER INFO: %v", err)
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
				ready = false
			}
		}
		if ready {
			return addrs
		}
		if ctx.Err() != nil {
			t.Fatal("cluster not ready in 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func newClusterClient(t *testing.T, addrs []string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestCluster(t *testing.T) {
	t.Parallel() // private servers; after the conformance suite, whose leak check sees the whole process
	addrs := startCluster(t)
	c := newClusterClient(t, addrs)
	s := newStore(t, c)
	other := storeWithPrefix(t, newClusterClient(t, addrs), s.Prefix())
	ctx := testCtx(t, 60*time.Second)

	t.Run("Slots", func(t *testing.T) {
		for _, k := range []string{"plain", "a{b}c", "{", "}", "{}", "}{", "%7B", "ключ 🔑", "x{y}z{w}"} {
			lk, fk := leaseKey(s.Prefix(), k), fenceKey(s.Prefix(), k)
			qk, xk := queueKey(s.Prefix(), k), queueExpiryKey(s.Prefix(), k)
			a, err1 := c.ClusterKeySlot(ctx, lk).Result()
			b, err2 := c.ClusterKeySlot(ctx, fk).Result()
			q, err3 := c.ClusterKeySlot(ctx, qk).Result()
			x, err4 := c.ClusterKeySlot(ctx, xk).Result()
			if err := errors.Join(err1, err2, err3, err4); err != nil {
				t.Fatal(err)
			}
			if a != b || a != q || a != x || int(a) != hashSlot(lk) {
				t.Errorf("key %q: CLUSTER KEYSLOT %d / %d / %d / %d, crc16 %d", k, a, b, q, x, hashSlot(lk))
			}
			r := req(k, token(t), "h", 10*time.Second)
			g, err := s.Acquire(ctx, r) // CROSSSLOT would fail here
			if err != nil {
				t.Fatalf("Acquire(%q): %v", k, err)
			}
			if info, err := other.Inspect(ctx, k); err != nil || !info.Held || info.Fence != g.Fence {
				t.Errorf("Inspect(%q) = %+v, %v", k, info, err)
			}
			// A waiter queues (all four keys in one script) and is granted
			// the key after the release.
			w := req(k, token(t), "w", 10*time.Second)
			w.Queue = true
			var he *lease.HeldError
			if _, err := other.Acquire(ctx, w); !errors.As(err, &he) || he.Queued != 0 || he.Holder != "h" {
				t.Fatalf("queued Acquire(%q) = %v, want held by h, 0 queued ahead", k, err)
			}
			if _, err := s.Acquire(ctx, req(k, token(t), "x", time.Second)); !errors.As(err, &he) || he.Queued != 1 {
				t.Fatalf("Acquire(%q) behind the waiter = %v, want 1 queued ahead", k, err)
			}
			if n := c.Exists(ctx, qk, xk).Val(); n != 2 {
				t.Errorf("key %q: %d queue keys, want 2", k, n)
			}
			if err := s.Release(ctx, r); err != nil {
				t.Fatalf("Release(%q): %v", k, err)
			}
			if _, err := other.Acquire(ctx, w); err != nil {
				t.Fatalf("the waiter's Acquire(%q) after the release: %v", k, err)
			}
			if err := other.Release(ctx, w); err != nil {
				t.Fatalf("the waiter's Release(%q): %v", k, err)
			}
			if n := c.Exists(ctx, qk, xk).Val(); n != 0 {
				t.Errorf("key %q: %d queue keys left, want none", k, n)
			}
		}
	})

	t.Run("Ops", func(t *testing.T) {
		a := req("job", token(t), "a", 10*time.Second)
		g1, err := s.Acquire(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		var he *lease.HeldError
		if _, err := other.Acquire(ctx, req("job", token(t), "b", time.Second)); !errors.As(err, &he) || he.Holder != "a" || he.Fence != g1.Fence {
			t.Fatalf("Acquire of a held key = %v", err)
		}
		if err := other.Renew(ctx, req("job", token(t), "b", time.Second)); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("foreign Renew = %v", err)
		}
		if err := s.Renew(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		g2, err := other.Acquire(ctx, req("job", token(t), "b", time.Second))
		if err != nil || g2.Fence <= g1.Fence {
			t.Fatalf("Acquire after release = %+v, %v (previous fence %d)", g2, err, g1.Fence)
		}
	})

	t.Run("RenewManyAcrossNodes", func(t *testing.T) {
		var rs []lease.Request
		for i := range 40 {
			r := req(fmt.Sprintf("batch-%d", i), token(t), "h", 500*time.Millisecond)
			if _, err := s.Acquire(ctx, r); err != nil {
				t.Fatal(err)
			}
			r.TTL = 30 * time.Second
			rs = append(rs, r)
		}
		rs = append(rs, req("batch-3", token(t), "x", time.Second), req("never", token(t), "x", time.Second))
		// The keys are spread over the masters.
		var nodes atomic.Int32 // ForEachMaster runs one goroutine per master
		_ = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			if n.DBSize(ctx).Val() > 0 {
				nodes.Add(1)
			}
			return nil
		})
		if nodes.Load() < 2 {
			t.Fatalf("the batch keys are on %d master(s), want several", nodes.Load())
		}
		errs := s.RenewMany(ctx, rs)
		for i, err := range errs {
			if i < 40 && err != nil {
				t.Errorf("RenewMany[%d] = %v", i, err)
			}
			if i >= 40 && !errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("RenewMany[%d] = %v, want ErrNotHeld", i, err)
			}
		}
		time.Sleep(time.Second)
		for _, r := range rs[:40] {
			if info, err := other.Inspect(ctx, r.Key); err != nil || !info.Held || info.Remaining < 20*time.Second {
				t.Errorf("%q after RenewMany: %+v, %v", r.Key, info, err)
			}
		}
		t.Logf("40 leases on %d masters renewed in one RenewMany", nodes.Load())
	})

	t.Run("Subscribe", func(t *testing.T) {
		sub := subscribe(t, s)
		for i := range 5 {
			k := fmt.Sprintf("notify-%d", i) // different slots, different nodes
			r := req(k, token(t), "h", 10*time.Second)
			if _, err := other.Acquire(ctx, r); err != nil {
				t.Fatal(err)
			}
			if err := other.Release(ctx, r); err != nil {
				t.Fatal(err)
			}
			if got, err := next(t, ctx, sub, 10*time.Second); err != nil || got != k {
				t.Fatalf("Next = %q, %v; want %q", got, err, k)
			}
		}
	})
}
