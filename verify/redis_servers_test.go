// Private Redis processes for the multi-node Redis runs: cluster nodes,
// replicas and sentinels on loopback ports, without persistence, killed at
// cleanup.

package verify_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/leasetest"
)

// redisNode is one redis-server (or sentinel) process, restartable on the
// same port and directory (a cluster node keeps its nodes.conf, not its data).
type redisNode struct {
	t    *testing.T
	port int
	dir  string
	args []string // besides port, bind, no persistence, dir

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (n *redisNode) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// startRedisNode starts redis-server with extra args on a free port; the test
// skips like the other Redis tests when LEASE_TEST_REDIS_ADDR is unset.
func startRedisNode(t *testing.T, args ...string) *redisNode {
	t.Helper()
	leasetest.Env(t, "LEASE_TEST_REDIS_ADDR")
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	n := &redisNode{t: t, port: freePort(t), dir: t.TempDir(), args: args}
	t.Cleanup(n.kill)
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *redisNode) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	args := append([]string{"--port", strconv.Itoa(n.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", n.dir, "--logfile", filepath.Join(n.dir, "log")}, n.args...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(n.done)
	return waitPing(n.addr(), n.done, filepath.Join(n.dir, "log"))
}

// startSentinel starts a sentinel with config lines conf.
func startSentinel(t *testing.T, conf ...string) *redisNode {
	t.Helper()
	n := &redisNode{t: t, port: freePort(t), dir: t.TempDir()}
	t.Cleanup(n.kill)
	path := filepath.Join(n.dir, "sentinel.conf")
	lines := append([]string{"port " + strconv.Itoa(n.port), "bind 127.0.0.1", "dir " + n.dir,
		"logfile " + filepath.Join(n.dir, "log")}, conf...)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", path, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(n.done)
	if err := waitPing(n.addr(), n.done, filepath.Join(n.dir, "log")); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitPing waits up to 10s for a PING answer (an error reply counts).
func waitPing(addr string, done <-chan struct{}, logPath string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		var rerr redis.Error
		if err == nil || errors.As(err, &rerr) {
			return nil
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("redis on %s exited at start:\n%s", addr, b)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis on %s not ready after 10s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process.
func (n *redisNode) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		_ = n.cmd.Process.Kill()
		<-n.done
		n.cmd = nil
	}
}

func (n *redisNode) client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: n.addr(), DialTimeout: time.Second})
	n.t.Cleanup(func() { _ = c.Close() })
	return c
}

// redisWait polls cond every 50ms until it holds or d passes.
func redisWait(ctx context.Context, d time.Duration, what string, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %v (last error: %v)", what, d, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// redisReplicasOnline reports whether the primary at c has n replicas online.
func redisReplicasOnline(ctx context.Context, c *redis.Client, n int) (bool, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return false, err
	}
	return strings.Contains(info, "role:master") && strings.Count(info, "state=online") >= n, nil
}

// redisInfoField returns field of an INFO reply.
func redisInfoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// redisLease reads the lease string at key (token NUL fence NUL holder, see
// redislease's grant.lua) from one server, as a map with the fields token,
// fence and holder; empty when the key holds no lease.
func redisLease(ctx context.Context, c *redis.Client, key string) (map[string]string, error) {
	v, err := c.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return map[string]string{}, nil
	}
	if err != nil {
		return map[string]string{}, err
	}
	token, rest, _ := strings.Cut(v, "\x00")
	fence, holder, _ := strings.Cut(rest, "\x00")
	return map[string]string{"token": token, "fence": fence, "holder": holder}, nil
}
