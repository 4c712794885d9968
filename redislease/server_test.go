// A private redis-server for tests that restart it, reset its statistics or
// build a cluster: loopback only, no persistence, temp dir, killed at cleanup.

package redislease_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease/leasetest"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/internal/testport"
)

// redisServerBin finds the redis-server binary: $LEASE_TEST_REDIS_SERVER,
// then $PATH. Private-server tests run with the other Redis tests (when
// LEASE_TEST_REDIS_ADDR is set) and skip, or fail under
// LEASE_TEST_REQUIRE_ALL=1, when there is no binary.
func redisServerBin(t testing.TB) string {
	t.Helper()
	leasetest.Env(t, "LEASE_TEST_REDIS_ADDR")
	if p := os.Getenv("LEASE_TEST_REDIS_SERVER"); p != "" {
		return p
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(leasetest.RequireAllEnv) == "1" {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	return p
}

// freePorts returns n distinct loopback TCP ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int { return testport.Free(t, n) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// redisServer is one private redis-server process (restartable).
type redisServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	out  syncBuffer

	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts a redis-server on a free loopback port with extra
// configuration args and returns once it answers PING.
func startRedis(t testing.TB, args ...string) *redisServer {
	t.Helper()
	return startRedisOn(t, freePorts(t, 1)[0], args...)
}

func startRedisOn(t testing.TB, port int, args ...string) *redisServer {
	t.Helper()
	s := &redisServer{t: t, bin: redisServerBin(t), dir: t.TempDir(), port: port, args: args}
	t.Cleanup(s.kill)
	s.start()
	return s
}

func (s *redisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *redisServer) start() {
	s.t.Helper()
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no",
		"--logfile", "",
	}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	done := make(chan struct{})
	s.done = done
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(done) }(s.cmd)

	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		var rerr redis.Error // an error reply (NOAUTH...) means it is up
		if err == nil || errors.As(err, &rerr) {
			return
		}
		select {
		case <-done:
			s.t.Fatalf("redis-server on %s exited at start:\n%s", s.Addr(), s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			s.t.Fatalf("redis-server on %s not ready after 10s: %v\n%s", s.Addr(), err, s.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop shuts the server down without saving and waits for it to exit.
func (s *redisServer) stop() {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := c.ShutdownNoSave(ctx).Err() // on success, the server closes the connection
	cancel()
	_ = c.Close()
	var rerr redis.Error
	if errors.As(err, &rerr) { // refused (NOAUTH...): kill it
		s.t.Logf("SHUTDOWN NOSAVE: %v; killing redis-server", err)
		s.kill()
		return
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.kill()
		s.t.Fatalf("redis-server on %s did not shut down in 10s", s.Addr())
	}
}

// kill ends the process if it still runs and waits for it.
func (s *redisServer) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Errorf("redis-server pid %d did not exit after SIGKILL", s.cmd.Process.Pid)
	}
}

// commandStats returns INFO commandstats as command name -> calls.
func commandStats(t *testing.T, ctx context.Context, c *redis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	stats := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("bad commandstats line %q", line)
				}
				stats[name] = n
			}
		}
	}
	return stats
}

func formatStats(m map[string]int) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, " %s=%d", k, m[k])
	}
	return strings.TrimSpace(b.String())
}
