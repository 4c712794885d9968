// The harness against a private primary/replica pair under one Redis
// Sentinel (quorum 1), through a redis+sentinel:// URL. The store fault is a
// forced failover (SENTINEL FAILOVER) while a worker holds the lease: the
// old primary keeps accepting writes until the sentinel demotes it, and
// those are lost (Redis replication is asynchronous), so a lease can vanish
// or a holder can believe in a lease the new primary never saw. Fencing must
// still refuse every stale write. TestRedisSentinelReplicaAck repeats it with
// replica_ack=1 (WAIT after every write).
//
//	./scripts/test -run 'TestRedisSentinel' ./verify/

package verify_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/verify"
)

const sentinelMaster = "leasekit"

type redisSentinel struct {
	t        *testing.T
	nodes    []*redisNode // the two data nodes
	sentinel *redisNode
	sc       *redis.SentinelClient

	mu        sync.Mutex
	key       string // the run's lease hash
	replicas  int    // replicas the new primary must have before a failover counts as done
	failovers int
	held      int // failovers while the lease was held
	kept      int // ... after which the new primary still had that holder's lease
}

func startRedisSentinel(t *testing.T) *redisSentinel {
	t.Helper()
	p := startRedisNode(t)
	r := startRedisNode(t, "--replicaof", "127.0.0.1", strconv.Itoa(p.port))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := redisWait(ctx, 30*time.Second, "replica online", func(ctx context.Context) (bool, error) {
		return redisReplicasOnline(ctx, p.client(), 1)
	}); err != nil {
		t.Fatal(err)
	}
	s := startSentinel(t,
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", sentinelMaster, p.port),
		"sentinel down-after-milliseconds "+sentinelMaster+" 2000",
		"sentinel failover-timeout "+sentinelMaster+" 10000")
	rs := &redisSentinel{t: t, nodes: []*redisNode{p, r}, sentinel: s,
		sc: redis.NewSentinelClient(&redis.Options{Addr: s.addr()})}
	t.Cleanup(func() { _ = rs.sc.Close() })
	// Sentinel polls INFO every 10 s and demotes a returning old primary
	// after 4 publish periods (8 s); Redis 7's SENTINEL DEBUG shortens both,
	// so that a failover completes within a CI-sized run.
	if err := rs.sc.Process(ctx, redis.NewStatusCmd(ctx, "sentinel", "debug", "info-period", 1000, "publish-period", 500)); err != nil {
		t.Logf("SENTINEL DEBUG (Redis < 7?): %v; failovers will take longer", err)
	}
	if err := rs.ready(ctx); err != nil {
		t.Fatal(err)
	}
	return rs
}

func (s *redisSentinel) url() string {
	return "redis+sentinel://" + s.sentinel.addr() + "/" + sentinelMaster
}

func (s *redisSentinel) primary(ctx context.Context) (string, error) {
	a, err := s.sc.GetMasterAddrByName(ctx, sentinelMaster).Result()
	if err != nil {
		return "", err
	}
	if len(a) != 2 {
		return "", fmt.Errorf("GET-MASTER-ADDR-BY-NAME: %v", a)
	}
	return net.JoinHostPort(a[0], a[1]), nil
}

// waitSettled waits until the sentinel names primary with no failover in
// progress and, with replicas > 0, the primary has that many replicas online
// (after a failover: once the sentinel has demoted the old primary, some
// seconds later). Without it, the sentinel finishes the demotion in the
// background while the nemesis goes on.
func (s *redisSentinel) waitSettled(ctx context.Context, primary string, replicas int) error {
	pc := redis.NewClient(&redis.Options{Addr: primary, DialTimeout: time.Second})
	defer pc.Close()
	return redisWait(ctx, 45*time.Second, "sentinel settled on "+primary, func(ctx context.Context) (bool, error) {
		if p, err := s.primary(ctx); err != nil || p != primary {
			return false, err
		}
		m, err := s.sc.Master(ctx, sentinelMaster).Result()
		if err != nil || m["flags"] != "master" {
			return false, err
		}
		return redisReplicasOnline(ctx, pc, replicas)
	})
}

// ready waits until the primary has its replica online and the sentinel
// knows that replica as a good one, so that SENTINEL FAILOVER can pick it.
func (s *redisSentinel) ready(ctx context.Context) error {
	primary, err := s.primary(ctx)
	if err != nil {
		return err
	}
	if err := s.waitSettled(ctx, primary, 1); err != nil {
		return err
	}
	return redisWait(ctx, 45*time.Second, "the sentinel knows the replica", func(ctx context.Context) (bool, error) {
		reps, err := s.sc.Replicas(ctx, sentinelMaster).Result()
		for _, r := range reps {
			if r["flags"] == "slave" && r["master-link-status"] == "ok" &&
				net.JoinHostPort(r["master-host"], r["master-port"]) == primary {
				return true, nil
			}
		}
		return false, err
	})
}

// failover forces a failover, preferably while a worker holds the lease,
// and waits until the old primary serves as the new one's replica.
func (s *redisSentinel) failover(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(ctx); err != nil { // the last failover's demotion may still run
		return err
	}
	old, err := s.primary(ctx)
	if err != nil {
		return err
	}
	oc := redis.NewClient(&redis.Options{Addr: old, DialTimeout: time.Second})
	defer oc.Close()
	var lease map[string]string
	_ = redisWait(ctx, 2*time.Second, "a holder", func(ctx context.Context) (bool, error) {
		v, err := redisLease(ctx, oc, s.key)
		lease = v
		return v["token"] != "", err
	})
	start := time.Now()
	if err := redisWait(ctx, 30*time.Second, "SENTINEL FAILOVER", func(ctx context.Context) (bool, error) {
		err := s.sc.Failover(ctx, sentinelMaster).Err()
		return err == nil, err // INPROG, NOGOODSLAVE: try again
	}); err != nil {
		return err
	}
	s.failovers++
	var primary string
	if err := redisWait(ctx, 30*time.Second, "new primary", func(ctx context.Context) (bool, error) {
		p, err := s.primary(ctx)
		primary = p
		return err == nil && p != old, err
	}); err != nil {
		return err
	}
	switched := time.Since(start)
	what := "no holder"
	if lease["token"] != "" {
		s.held++
		nc := redis.NewClient(&redis.Options{Addr: primary, DialTimeout: time.Second})
		v, _ := redisLease(ctx, nc, s.key)
		after := v["token"]
		_ = nc.Close()
		what = fmt.Sprintf("lease held by %s with fence %s; on the new primary: ", lease["holder"], lease["fence"])
		if after == lease["token"] {
			s.kept++
			what += "the same holder's lease"
		} else if after == "" {
			what += "no lease"
		} else {
			what += "another holder's lease"
		}
	}
	err = s.waitSettled(ctx, primary, s.replicas)
	s.t.Logf("verify: SENTINEL FAILOVER %s -> %s in %v (%s); settled after %v", old, primary,
		switched.Round(time.Millisecond), what, time.Since(start).Round(time.Millisecond))
	return err
}

func runRedisSentinel(t *testing.T, query string, replicas int) {
	s := startRedisSentinel(t)
	s.replicas = replicas
	prefix := "verify-sentinel-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	s.key = prefix + "{" + prefix + "key}"
	rep := run(t, verify.Config{Store: s.url() + query, TTL: time.Second, Prefix: prefix,
		Duration: max(runDuration(t), 25*time.Second), Restart: s.failover,
		Faults: []string{verify.FaultRestart, verify.FaultKill, verify.FaultStop, verify.FaultRestart}})
	check(t, rep, verify.FaultRestart, verify.FaultKill, verify.FaultStop)
	s.mu.Lock()
	t.Logf("%d forced failovers (the \"store restart\" faults), %d while a worker held the lease, after %d of which the new primary had that lease",
		s.failovers, s.held, s.kept)
	if s.held == 0 {
		t.Errorf("no failover happened while the lease was held")
	}
	s.mu.Unlock()
	// The run cleaned up after itself (on the primary of the moment).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := s.primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: p})
	defer c.Close()
	if keys, err := c.Keys(ctx, "*"+prefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("keys left behind: %v, %v", keys, err)
	}
}

func TestRedisSentinel(t *testing.T) { t.Parallel(); runRedisSentinel(t, "", 0) }

// TestRedisSentinelReplicaAck: the same with WAIT 1 after every write. A new
// primary accepts no write until the old one is back as its replica, so the
// failover waits for that before the nemesis goes on.
func TestRedisSentinelReplicaAck(t *testing.T) {
	t.Parallel()
	runRedisSentinel(t, "?replica_ack=1&replica_ack_timeout=500ms", 1)
}
