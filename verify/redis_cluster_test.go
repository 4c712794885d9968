// The harness against a private three-master Redis Cluster (through a
// redis+cluster:// URL), whose masters, the one serving the lease's slot on
// every other turn, are killed and restarted without persistence while
// leases are held: the lease and its fence counter vanish with the data, and
// the fences must still grow (the server clock) and stale writes be refused.
// TestRedisClusterReplicaAck repeats it with a replica per master and
// replica_ack=1 (WAIT after every write).
//
//	./scripts/test -run 'TestRedisCluster' ./verify/

package verify_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/verify"
)

type redisCluster struct {
	t     *testing.T
	nodes []*redisNode // three masters first, then their replicas
	bus   map[*redisNode]int

	mu       sync.Mutex
	key      string // the run's lease hash
	restarts int
	held     int // restarts of the key's master while it held the lease
}

func clusterNode(t *testing.T) (*redisNode, int) {
	bus := freePort(t)
	return startRedisNode(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", "5000"), bus
}

// startRedisCluster starts three masters sharing the slots and, with
// replicas, one replica of each.
func startRedisCluster(t *testing.T, replicas bool) *redisCluster {
	t.Helper()
	c := &redisCluster{t: t, bus: map[*redisNode]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := 3
	if replicas {
		n = 6
	}
	for i := range n {
		node, bus := clusterNode(t)
		c.nodes = append(c.nodes, node)
		c.bus[node] = bus
		cl := node.client()
		if i < 3 {
			lo, hi := i*16384/3, (i+1)*16384/3-1
			if err := cl.Do(ctx, "cluster", "addslotsrange", lo, hi).Err(); err != nil {
				t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
			}
			if err := cl.Do(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
				t.Fatalf("CLUSTER SET-CONFIG-EPOCH: %v", err)
			}
		}
		if i > 0 {
			if err := cl.Do(ctx, "cluster", "meet", "127.0.0.1", c.nodes[0].port, c.bus[c.nodes[0]]).Err(); err != nil {
				t.Fatalf("CLUSTER MEET: %v", err)
			}
		}
	}
	for i := 3; i < n; i++ {
		id, err := c.nodes[i-3].client().Do(ctx, "cluster", "myid").Text()
		if err != nil {
			t.Fatal(err)
		}
		cl := c.nodes[i].client()
		if err := redisWait(ctx, 30*time.Second, "CLUSTER REPLICATE", func(ctx context.Context) (bool, error) {
			err := cl.Do(ctx, "cluster", "replicate", id).Err()
			return err == nil, err // "Unknown node" until the gossip reached it
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.waitOK(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitOK waits until every node sees the whole cluster in state ok and, if
// there are replicas, every master has its replica online.
func (c *redisCluster) waitOK(ctx context.Context) error {
	for _, node := range c.nodes {
		cl := redis.NewClient(&redis.Options{Addr: node.addr(), DialTimeout: time.Second})
		err := redisWait(ctx, 45*time.Second, "cluster state ok on "+node.addr(), func(ctx context.Context) (bool, error) {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return false, err
			}
			if redisInfoField(info, "cluster_state") != "ok" || redisInfoField(info, "cluster_known_nodes") != strconv.Itoa(len(c.nodes)) {
				return false, nil
			}
			if len(c.nodes) == 3 {
				return true, nil
			}
			repl, err := cl.Info(ctx, "replication").Result()
			if err != nil {
				return false, err
			}
			if redisInfoField(repl, "role") == "master" {
				return strings.Contains(repl, "state=online"), nil
			}
			return redisInfoField(repl, "master_link_status") == "up", nil
		})
		_ = cl.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *redisCluster) url() string {
	var addrs []string
	for _, n := range c.nodes[:3] {
		addrs = append(addrs, n.addr())
	}
	return "redis+cluster://" + strings.Join(addrs, ",")
}

// keyMaster returns the node serving the lease's slot now.
func (c *redisCluster) keyMaster(ctx context.Context) (*redisNode, error) {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.nodes[0].addr(), c.nodes[1].addr(), c.nodes[2].addr()}})
	defer cl.Close()
	m, err := cl.MasterForKey(ctx, c.key)
	if err != nil {
		return nil, err
	}
	for _, n := range c.nodes {
		if n.addr() == m.Options().Addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node at %s", m.Options().Addr)
}

// restart kills one master — the lease's on every other call, while the
// lease is held if it can — with SIGKILL and starts it again on the same
// port without its data.
func (c *redisCluster) restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restarts++
	km, err := c.keyMaster(ctx)
	if err != nil {
		return err
	}
	victim := km
	if c.restarts%2 == 0 {
		for _, n := range c.nodes {
			if n != km && redisRole(ctx, n) == "master" {
				victim = n
				break
			}
		}
	}
	what := "another master"
	if victim == km {
		// Kill it while a worker holds the lease, if one does within 2 s (as
		// the Sentinel test's failover): on a loaded machine the lease may
		// be free at the moment of a fault.
		what = "the lease's master"
		cl := redis.NewClient(&redis.Options{Addr: km.addr()})
		var v map[string]string
		_ = redisWait(ctx, 2*time.Second, "a holder", func(ctx context.Context) (bool, error) {
			l, err := redisLease(ctx, cl, c.key)
			v = l
			return l["token"] != "", err
		})
		_ = cl.Close()
		if v["token"] != "" {
			c.held++
			what += fmt.Sprintf(", the lease held by %s with fence %s", v["holder"], v["fence"])
		}
	}
	c.t.Logf("verify: kill -9 Redis Cluster node %s (%s) and restart it without its data", victim.addr(), what)
	start := time.Now()
	victim.kill()
	time.Sleep(300 * time.Millisecond)
	if err := victim.start(); err != nil {
		return err
	}
	err = c.waitOK(ctx)
	c.t.Logf("verify: node %s back, cluster ok after %v", victim.addr(), time.Since(start).Round(time.Millisecond))
	return err
}

func redisRole(ctx context.Context, n *redisNode) string {
	cl := redis.NewClient(&redis.Options{Addr: n.addr()})
	defer cl.Close()
	info, _ := cl.Info(ctx, "replication").Result()
	return redisInfoField(info, "role")
}

func runRedisCluster(t *testing.T, replicas bool, query string) {
	c := startRedisCluster(t, replicas)
	prefix := "verify-cluster-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	c.key = prefix + "{" + prefix + "key}"
	rep := run(t, verify.Config{Store: c.url() + query, TTL: time.Second, Prefix: prefix,
		Duration: max(runDuration(t), 20*time.Second), Restart: c.restart,
		Faults: []string{verify.FaultRestart, verify.FaultKill, verify.FaultStop, verify.FaultRestart}})
	check(t, rep, verify.FaultRestart, verify.FaultKill, verify.FaultStop)
	c.mu.Lock()
	t.Logf("%d node restarts, %d of them of the lease's master while it held the lease", c.restarts, c.held)
	if c.held == 0 {
		t.Errorf("the lease's master was never restarted while it held the lease")
	}
	c.mu.Unlock()
	// The run cleaned up after itself: no key of its prefix on any master.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		if redisRole(ctx, n) != "master" {
			continue
		}
		if keys, err := n.client().Keys(ctx, "*"+prefix+"*").Result(); err != nil || len(keys) != 0 {
			t.Errorf("keys left behind on %s: %v, %v", n.addr(), keys, err)
		}
	}
}

func TestRedisCluster(t *testing.T) { t.Parallel(); runRedisCluster(t, false, "") }

// TestRedisClusterReplicaAck: one replica per master, WAIT 1 after every write.
func TestRedisClusterReplicaAck(t *testing.T) {
	t.Parallel()
	runRedisCluster(t, true, "?replica_ack=1&replica_ack_timeout=500ms")
}
