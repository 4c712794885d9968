// WithReplicaAck on a private primary with one replica, and on a private
// Cluster where only one master has a replica: WAIT follows every write on
// the key's node, and a write too few replicas acknowledged is a transient
// ErrReplicaAck (an acquisition then leaves no orphan behind).

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
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/redislease"
	"github.com/redis/go-redis/v9"
)

// startReplica starts a redis-server replicating primary and returns once
// the primary reports it online.
func startReplica(t testing.TB, primary string) *redisServer {
	t.Helper()
	host, port, _ := strings.Cut(primary, ":")
	r := startRedis(t, "--replicaof", host, port)
	waitReplicas(t, primary)
	return r
}

// waitReplicas waits until the primary at addr has one replica online.
func waitReplicas(t testing.TB, addr string) {
	t.Helper()
	c := newClient(t, addr)
	ctx := testCtx(t, 30*time.Second)
	for {
		info, _ := c.Info(ctx, "replication").Result()
		if strings.Contains(info, "connected_slaves:1\r") && strings.Contains(info, "state=online") {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: no replica online after 30s:\n%s", addr, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReplicaAckValidation(t *testing.T) {
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer single.Close()
	shortRT := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 500 * time.Millisecond})
	defer shortRT.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		c       redis.UniversalClient
		n       int
		timeout time.Duration
		ok      bool
	}{
		{single, 0, 0, true}, {ring, 0, 0, true}, {single, 1, 100 * time.Millisecond, true},
		{single, -1, time.Second, false}, {single, 0, -time.Second, false}, {single, 1, 0, false},
		{single, 1, single.Options().ReadTimeout, false}, {shortRT, 1, time.Second, false}, {ring, 1, time.Second, false},
	} {
		_, err := redislease.New(tc.c, redislease.WithReplicaAck(tc.n, tc.timeout))
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%T, WithReplicaAck(%d, %v): New = %v, want ok %v", tc.c, tc.n, tc.timeout, err, tc.ok)
		}
	}
}

func TestReplicaAck(t *testing.T) {
	t.Parallel() // private servers; after the conformance suite, whose leak check sees the whole process
	primary := startRedis(t)
	replica := startReplica(t, primary.Addr())
	pc, rc := newClient(t, primary.Addr()), newClient(t, replica.Addr())
	s := newStore(t, pc, redislease.WithReplicaAck(1, 2*time.Second))
	short, err := redislease.New(pc, redislease.WithPrefix(s.Prefix()), redislease.WithReplicaAck(2, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 60*time.Second)

	t.Run("Acked", func(t *testing.T) {
		// The first EVALSHA finds no script (NOSCRIPT) and is sent again as EVAL.
		if err := pc.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		before := commandStats(t, ctx, pc)["wait"]
		a := req("acked", token(t), "a", 30*time.Second)
		g, err := s.Acquire(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		// WAIT returned: the replica has the lease already.
		lk := leaseKey(s.Prefix(), "acked")
		if got := rc.Get(ctx, lk).Val(); !strings.Contains(got, "\x00"+strconv.FormatUint(g.Fence, 10)+"\x00") {
			t.Errorf("replica's lease right after Acquire = %q, want fence %d", got, g.Fence)
		}
		for i, err := range s.RenewMany(ctx, []driver.Request{a, req("never", token(t), "x", time.Second)}) {
			if (i == 1) != errors.Is(err, lease.ErrNotHeld) || i == 0 && err != nil {
				t.Errorf("RenewMany[%d] = %v", i, err)
			}
		}
		if _, err := s.Acquire(ctx, req("acked", token(t), "x", time.Second)); !errors.Is(err, lease.ErrHeld) {
			t.Errorf("Acquire of a held key = %v, want ErrHeld", err)
		}
		if err := s.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		if n := rc.Exists(ctx, lk).Val(); n != 0 {
			t.Errorf("replica still has the released lease")
		}
		// One per write and one per refused acquire, plus one per NOSCRIPT
		// (acquire, the first renewal, release).
		if got := commandStats(t, ctx, pc)["wait"] - before; got != 8 {
			t.Errorf("%d WAIT calls, want 8", got)
		}
	})

	t.Run("TooFewReplicas", func(t *testing.T) {
		// Two replicas wanted, one connected: writes are applied on the
		// primary and reported as not acknowledged.
		a := req("short", token(t), "a", 30*time.Second)
		_, err := short.Acquire(ctx, a)
		if !errors.Is(err, redislease.ErrReplicaAck) || errors.Is(err, lease.ErrHeld) || !strings.Contains(err.Error(), "1 of 2") {
			t.Fatalf("Acquire with too few replicas = %v, want ErrReplicaAck (1 of 2)", err)
		}
		if info, _ := s.Inspect(ctx, "short"); !info.Held {
			t.Fatalf("the unacknowledged acquisition was not applied on the primary: %+v", info)
		}
		if errs := short.RenewMany(ctx, []driver.Request{a}); !errors.Is(errs[0], redislease.ErrReplicaAck) {
			t.Errorf("RenewMany = %v, want ErrReplicaAck", errs[0])
		}
		if err := short.Renew(ctx, req("short", token(t), "x", time.Second)); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("foreign Renew (no write) = %v, want ErrNotHeld", err)
		}
		if err := short.Release(ctx, a); !errors.Is(err, redislease.ErrReplicaAck) {
			t.Errorf("Release = %v, want ErrReplicaAck", err)
		}
	})

	t.Run("ClientCleansUp", func(t *testing.T) {
		// The Client releases an unacknowledged acquisition: no orphan.
		cl, err := lease.New(short, lease.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := cl.TryAcquire(ctx, "cleanup"); !errors.Is(err, redislease.ErrReplicaAck) {
			t.Fatalf("TryAcquire = %v, want ErrReplicaAck", err)
		}
		for {
			if info, err := s.Inspect(ctx, "cleanup"); err == nil && !info.Held {
				break
			}
			if ctx.Err() != nil {
				t.Fatal("the unacknowledged acquisition is still held")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// TestReplicaAckCluster: on a Cluster where only the first master has a
// replica, writes to its keys are acknowledged and the others are not: WAIT,
// which has no key, goes to the key's node.
func TestReplicaAckCluster(t *testing.T) {
	t.Parallel() // private servers; after the conformance suite, whose leak check sees the whole process
	addrs := startCluster(t)
	port := freePorts(t, 2)
	rep := startRedisOn(t, port[0], "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(port[1]), "--cluster-node-timeout", "5000")
	ctx := testCtx(t, 60*time.Second)
	m0, rc := newClient(t, addrs[0]), newClient(t, rep.Addr())
	id := m0.Do(ctx, "cluster", "myid").Val()
	bus := m0.ConfigGet(ctx, "cluster-port").Val()["cluster-port"]
	if err := rc.Do(ctx, "cluster", "meet", "127.0.0.1", strings.Split(addrs[0], ":")[1], bus).Err(); err != nil {
		t.Fatalf("CLUSTER MEET: %v", err)
	}
	for rc.Do(ctx, "cluster", "replicate", id).Err() != nil { // until the new node knows the master
		if ctx.Err() != nil {
			t.Fatal("CLUSTER REPLICATE never succeeded")
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitReplicas(t, addrs[0])

	c := newClusterClient(t, addrs)
	s := newStore(t, c, redislease.WithReplicaAck(1, 500*time.Millisecond))
	acked, short := 0, 0
	for i := range 12 {
		k := fmt.Sprintf("k%d", i)
		node, err := c.MasterForKey(ctx, leaseKey(s.Prefix(), k))
		if err != nil {
			t.Fatal(err)
		}
		onM0 := node.Options().Addr == addrs[0]
		_, err = s.Acquire(ctx, req(k, token(t), "h", 30*time.Second))
		switch {
		case onM0 && err == nil:
			acked++
		case !onM0 && errors.Is(err, redislease.ErrReplicaAck):
			short++
		default:
			t.Errorf("Acquire(%q) on %s (replicated: %v) = %v", k, node.Options().Addr, onM0, err)
		}
	}
	if acked == 0 || short == 0 {
		t.Errorf("%d keys on the replicated master, %d elsewhere: want some of each", acked, short)
	}
}

// BenchmarkReplicaAck measures acquire+release cycles on a private primary
// with one replica, without and with WithReplicaAck(1, 100ms):
//
//	./scripts/test --no-install --exec go test -run '^$' -bench BenchmarkReplicaAck -benchtime 3s ./redislease/
func BenchmarkReplicaAck(b *testing.B) {
	primary := startRedis(b)
	startReplica(b, primary.Addr())
	c := newClient(b, primary.Addr())
	for _, n := range []int{0, 1} {
		b.Run(fmt.Sprintf("Wait%d", n), func(b *testing.B) {
			s := newStore(b, c, redislease.WithReplicaAck(n, 100*time.Millisecond))
			ctx := context.Background()
			r := req("bench", token(b), "h", 10*time.Second)
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
