// WithReplicaAck on a private primary with one replica, and on a private
// Cluster where only one master has a replica: WAIT is sent after every
// write, on the key's node, and a write too few replicas acknowledged is a
// transient ErrReplicaAck (an acquisition then leaves no orphan behind).

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

// startReplica starts a redis-server replicating primary and returns once
// the primary reports it connected and in sync.
func startReplica(t testing.TB, primary string, extra ...string) *redisServer {
	t.Helper()
	host, port, _ := strings.Cut(primary, ":")
	r := startRedis(t, append([]string{"--replicaof", host, port}, extra...)...)
	waitReplicas(t, primary, 1)
	return r
}

// waitReplicas waits until the primary at addr has n replicas online.
func waitReplicas(t testing.TB, addr string, n int) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := testCtx(t, 30*time.Second)
	for {
		info, _ := c.Info(ctx, "replication").Result()
		if strings.Contains(info, "connected_slaves:"+strconv.Itoa(n)+"\r") &&
			strings.Count(info, "state=online") >= n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: %d replica(s) not online after 30s:\n%s", addr, n, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ackStore(t testing.TB, c redis.UniversalClient, n int, timeout time.Duration) *redislease.Store {
	t.Helper()
	prefix := uniquePrefix(t)
	s, err := redislease.New(c, redislease.WithPrefix(prefix), redislease.WithReplicaAck(n, timeout))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { deletePrefix(c, prefix) })
	return s
}

func TestReplicaAckValidation(t *testing.T) {
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer single.Close()
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cluster.Close()
	shortRT := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 500 * time.Millisecond})
	defer shortRT.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		name    string
		c       redis.UniversalClient
		n       int
		timeout time.Duration
		ok      bool
	}{
		{"off", single, 0, 0, true},
		{"off on a ring", ring, 0, 0, true},
		{"one", single, 1, 100 * time.Millisecond, true},
		{"cluster", cluster, 2, time.Second, true},
		{"negative n", single, -1, time.Second, false},
		{"negative timeout", single, 1, -time.Second, false},
		{"negative timeout, n 0", single, 0, -time.Second, false},
		{"zero timeout blocks forever", single, 1, 0, false},
		{"timeout at ReadTimeout", single, 1, single.Options().ReadTimeout, false},
		{"timeout beyond a short ReadTimeout", shortRT, 1, time.Second, false},
		{"ring", ring, 1, time.Second, false},
	} {
		_, err := redislease.New(tc.c, redislease.WithReplicaAck(tc.n, tc.timeout))
		if tc.ok && err != nil {
			t.Errorf("%s: New = %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", tc.name, err)
		}
	}
}

func TestReplicaAck(t *testing.T) {
	t.Parallel() // private servers; after the conformance suite, whose leak check sees the whole process
	primary := startRedis(t)
	replica := startReplica(t, primary.Addr())
	pc := newClient(t, primary.Addr())
	rc := newClient(t, replica.Addr())
	s := ackStore(t, pc, 1, 2*time.Second)
	ctx := testCtx(t, 60*time.Second)

	t.Run("Acked", func(t *testing.T) {
		// Warm the script cache: a first EVALSHA fails with NOSCRIPT and is
		// sent again as EVAL, with a second WAIT.
		w := req("warm", token(t), "w", time.Minute)
		if _, err := s.Acquire(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := s.Renew(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, w); err != nil {
			t.Fatal(err)
		}
		before := commandStats(t, ctx, pc)["wait"]
		a := req("acked", token(t), "a", 30*time.Second)
		g, err := s.Acquire(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		// WAIT returned: the replica has the lease already, no sleep needed.
		lk := leaseKey(s.Prefix(), "acked")
		if _, got, _ := splitLease(rc.Get(ctx, lk).Val()); got != strconv.FormatUint(g.Fence, 10) {
			t.Errorf("replica's fence right after Acquire = %q, want %d", got, g.Fence)
		}
		if err := s.Renew(ctx, a); err != nil {
			t.Fatal(err)
		}
		b := req("acked-2", token(t), "b", 30*time.Second)
		if _, err := s.Acquire(ctx, b); err != nil {
			t.Fatal(err)
		}
		for i, err := range s.RenewMany(ctx, []lease.Request{a, b, req("never", token(t), "x", time.Second)}) {
			if want := i == 2; errors.Is(err, lease.ErrNotHeld) != want || (!want && err != nil) {
				t.Errorf("RenewMany[%d] = %v", i, err)
			}
		}
		var he *lease.HeldError
		if _, err := s.Acquire(ctx, req("acked", token(t), "x", time.Second)); !errors.As(err, &he) {
			t.Errorf("Acquire of a held key = %v, want a HeldError", err)
		}
		if err := s.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		if n := rc.Exists(ctx, lk).Val(); n != 0 {
			t.Errorf("replica still has the released lease")
		}
		// One WAIT per write, one per RenewMany batch, and one after the
		// refused acquisition (it may have queued nothing, but WAIT is sent).
		if got := commandStats(t, ctx, pc)["wait"] - before; got != 6 {
			t.Errorf("%d WAIT calls, want 6 (acquire, renew, acquire, batch, refused acquire, release)", got)
		}
	})

	t.Run("NoScript", func(t *testing.T) {
		if err := pc.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		a := req("flushed", token(t), "a", 30*time.Second)
		if _, err := s.Acquire(ctx, a); err != nil {
			t.Fatalf("Acquire after SCRIPT FLUSH: %v", err)
		}
		if err := pc.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if errs := s.RenewMany(ctx, []lease.Request{a}); errs[0] != nil {
			t.Fatalf("RenewMany after SCRIPT FLUSH: %v", errs[0])
		}
		if err := s.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("TooFewReplicas", func(t *testing.T) {
		// Two replicas wanted, one connected: every write is applied on the
		// primary and reported as not acknowledged.
		s2 := storeWithAckPrefix(t, pc, s.Prefix(), 2, 200*time.Millisecond)
		a := req("short", token(t), "a", 30*time.Second)
		_, err := s2.Acquire(ctx, a)
		if !errors.Is(err, redislease.ErrReplicaAck) || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("Acquire with too few replicas = %v, want ErrReplicaAck only", err)
		}
		if !strings.Contains(err.Error(), "1 of 2") {
			t.Errorf("error %q does not say how many replicas acknowledged", err)
		}
		if info, _ := s.Inspect(ctx, "short"); !info.Held {
			t.Fatalf("the unacknowledged acquisition was not applied on the primary: %+v", info)
		}
		if err := s2.Renew(ctx, a); !errors.Is(err, redislease.ErrReplicaAck) {
			t.Errorf("Renew = %v, want ErrReplicaAck", err)
		}
		if errs := s2.RenewMany(ctx, []lease.Request{a}); !errors.Is(errs[0], redislease.ErrReplicaAck) {
			t.Errorf("RenewMany = %v, want ErrReplicaAck", errs[0])
		}
		// A foreign token's renewal wrote nothing: ErrNotHeld, not an ack error.
		if err := s2.Renew(ctx, req("short", token(t), "x", time.Second)); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("foreign Renew = %v, want ErrNotHeld", err)
		}
		if err := s2.Release(ctx, a); !errors.Is(err, redislease.ErrReplicaAck) {
			t.Errorf("Release = %v, want ErrReplicaAck", err)
		}
		if info, _ := s.Inspect(ctx, "short"); info.Held {
			t.Errorf("the unacknowledged release was not applied on the primary: %+v", info)
		}
	})

	t.Run("ClientCleansUp", func(t *testing.T) {
		// Through the lease Client: an unacknowledged acquisition is an
		// error, and the Client releases the token it may have written, so
		// no orphan holds the key for its TTL.
		s2 := storeWithAckPrefix(t, pc, s.Prefix(), 2, 100*time.Millisecond)
		cl, err := lease.New(s2, lease.WithTTL(time.Minute), lease.WithHolder("orphan?"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		_, err = cl.TryAcquire(ctx, "cleanup")
		if !errors.Is(err, redislease.ErrReplicaAck) {
			t.Fatalf("TryAcquire = %v, want ErrReplicaAck", err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			info, err := s.Inspect(ctx, "cleanup")
			if err == nil && !info.Held {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the unacknowledged acquisition is still held after 20s (TTL 1m): %+v, %v", info, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("ReplicaDown", func(t *testing.T) {
		replica.stop()
		a := req("down", token(t), "a", 30*time.Second)
		start := time.Now()
		_, err := s.Acquire(ctx, a)
		if !errors.Is(err, redislease.ErrReplicaAck) || !strings.Contains(err.Error(), "0 of 1") {
			t.Fatalf("Acquire with the replica down = %v, want ErrReplicaAck (0 of 1)", err)
		}
		t.Logf("acquire with the replica down: %v after %v", err, time.Since(start).Round(time.Millisecond))
	})
}

func storeWithAckPrefix(t *testing.T, c redis.UniversalClient, prefix string, n int, timeout time.Duration) *redislease.Store {
	t.Helper()
	s, err := redislease.New(c, redislease.WithPrefix(prefix), redislease.WithReplicaAck(n, timeout))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// TestReplicaAckCluster: on a Cluster where only the first master has a
// replica, writes to keys of that master are acknowledged and writes to the
// others are not. WAIT has no key, so this shows it goes to the key's node.
func TestReplicaAckCluster(t *testing.T) {
	t.Parallel() // private servers; after the conformance suite, whose leak check sees the whole process
	addrs := startCluster(t)
	port := freePorts(t, 2)
	rep := startRedisOn(t, port[0], "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(port[1]), "--cluster-node-timeout", "5000")
	ctx := testCtx(t, 60*time.Second)
	m0 := newClient(t, addrs[0])
	id, err := m0.Do(ctx, "cluster", "myid").Text()
	if err != nil {
		t.Fatal(err)
	}
	rc := newClient(t, rep.Addr())
	if err := rc.Do(ctx, "cluster", "meet", "127.0.0.1", strings.Split(addrs[0], ":")[1], port2(t, m0, ctx)).Err(); err != nil {
		t.Fatalf("CLUSTER MEET: %v", err)
	}
	for {
		err := rc.Do(ctx, "cluster", "replicate", id).Err()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("CLUSTER REPLICATE: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // until the new node knows the master
	}
	waitReplicas(t, addrs[0], 1)

	c := newClusterClient(t, addrs)
	s := ackStore(t, c, 1, 500*time.Millisecond)
	acked, short := 0, 0
	for i := range 12 {
		k := fmt.Sprintf("k%d", i)
		node, err := c.MasterForKey(ctx, leaseKey(s.Prefix(), k))
		if err != nil {
			t.Fatal(err)
		}
		onM0 := node.Options().Addr == addrs[0]
		r := req(k, token(t), "h", 30*time.Second)
		_, err = s.Acquire(ctx, r)
		switch {
		case onM0 && err == nil:
			acked++
		case !onM0 && errors.Is(err, redislease.ErrReplicaAck):
			short++
		default:
			t.Errorf("Acquire(%q) on %s (replicated: %v) = %v", k, node.Options().Addr, onM0, err)
		}
		errs := s.RenewMany(ctx, []lease.Request{r})
		if onM0 != (errs[0] == nil) {
			t.Errorf("RenewMany(%q) on %s (replicated: %v) = %v", k, node.Options().Addr, onM0, errs[0])
		}
	}
	if acked == 0 || short == 0 {
		t.Errorf("%d keys on the replicated master, %d elsewhere: want some of each", acked, short)
	}
	t.Logf("%d acquisitions acknowledged on the replicated master, %d refused on the others", acked, short)
}

// port2 returns the cluster bus port of the node c is connected to.
func port2(t *testing.T, c *redis.Client, ctx context.Context) string {
	t.Helper()
	v, err := c.ConfigGet(ctx, "cluster-port").Result()
	if err != nil || v["cluster-port"] == "" {
		t.Fatalf("CONFIG GET cluster-port: %v %v", v, err)
	}
	return v["cluster-port"]
}

// BenchmarkReplicaAck measures acquire+release cycles on a private primary
// with one replica on loopback, without and with WithReplicaAck(1, 100ms):
//
//	./scripts/test --no-install --exec go test -run '^$' -bench BenchmarkReplicaAck -benchtime 3s ./redislease/
func BenchmarkReplicaAck(b *testing.B) {
	primary := startRedis(b)
	startReplica(b, primary.Addr())
	c := newClient(b, primary.Addr())
	for _, bc := range []struct {
		name string
		n    int
	}{{"NoWait", 0}, {"Wait1", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			s := ackStore(b, c, bc.n, 100*time.Millisecond)
			ctx := context.Background()
			r := req("bench", token(b), "h", 10*time.Second)
			if _, err := s.Acquire(ctx, r); err != nil { // warm the script cache
				b.Fatal(err)
			}
			if err := s.Release(ctx, r); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := s.Acquire(ctx, r); err != nil {
					b.Fatal(err)
				}
				if err := s.Release(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
		})
	}
}
