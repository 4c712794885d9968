// The store on a private three-node Redis Cluster: scripts must never touch
// keys of two slots. TestConformanceCluster runs the suite (announcements
// and batched renewals across nodes included) on the same kind of cluster.

package redislease_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/redislease"
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
	other, err := redislease.New(newClusterClient(t, addrs), redislease.WithPrefix(s.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 60*time.Second)

	t.Run("Slots", func(t *testing.T) {
		for _, k := range []string{"plain", "a{b}c", "{", "}", "{}", "}{", "%7B", "ключ 🔑", "x{y}z{w}"} {
			lk := leaseKey(s.Prefix(), k)
			var slots []int64
			for _, key := range []string{lk, lk + ":fence", lk + ":q", lk + ":qx", lk + ":qc", lk + ":r", lk + ":rh", lk + ":b"} {
				slots = append(slots, c.ClusterKeySlot(ctx, key).Val())
			}
			if len(slices.Compact(slots)) != 1 {
				t.Errorf("key %q: slots %v, want one", k, slots)
			}
			r := req(k, token(t), "h", 10*time.Second)
			g, err := s.Acquire(ctx, r) // CROSSSLOT would fail here
			if err != nil {
				t.Fatalf("Acquire(%q): %v", k, err)
			}
			if info, err := other.Inspect(ctx, k); err != nil || !info.Held || info.Fence != g.Fence {
				t.Errorf("Inspect(%q) = %+v, %v", k, info, err)
			}
			// A waiter queues (the queue keys in one script) and gets the key.
			w := req(k, token(t), "w", 10*time.Second)
			w.Queue = true
			var he *lease.HeldError
			if _, err := other.Acquire(ctx, w); !errors.As(err, &he) || he.Queued != 0 || he.Holder != "h" {
				t.Fatalf("queued Acquire(%q) = %v, want held by h, 0 queued ahead", k, err)
			}
			if n := c.Exists(ctx, lk+":q", lk+":qx").Val(); n != 2 {
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
			// Readers: all seven keys in one script.
			rd := req(k, token(t), "r", 10*time.Second)
			rd.Shared = true
			if _, err := s.Acquire(ctx, rd); err != nil {
				t.Fatalf("shared Acquire(%q): %v", k, err)
			}
			if info, err := other.Inspect(ctx, k); err != nil || info.Readers != 1 {
				t.Errorf("Inspect(%q) of a reader = %+v, %v", k, info, err)
			}
			if err := other.Release(ctx, rd); err != nil {
				t.Fatalf("the reader's Release(%q): %v", k, err)
			}
			if n := c.Exists(ctx, lk, lk+":q", lk+":qx", lk+":r", lk+":rh").Val(); n != 0 {
				t.Errorf("key %q: %d lease, queue or reader keys left, want none", k, n)
			}
		}
	})
}
