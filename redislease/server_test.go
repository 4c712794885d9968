// A private redis-server for tests that restart it, reset its statistics or
// build a cluster: loopback only, no persistence, temp dir, killed at cleanup.

package redislease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// redisServer is one private redis-server process (restartable).
type redisServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string

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

// log returns the server's log file.
func (s *redisServer) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return string(b)
}

func (s *redisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *redisServer) start() {
	s.t.Helper()
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no",
		"--logfile", "redis.log",
	}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
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
			s.t.Fatalf("redis-server on %s exited at start:\n%s", s.Addr(), s.log())
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			s.t.Fatalf("redis-server on %s not ready after 10s: %v\n%s", s.Addr(), err, s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends the process if it still runs and waits for it.
func (s *redisServer) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// commandStats returns INFO commandstats as command name -> calls.
func commandStats(t *testing.T, ctx context.Context, c *redis.Client) map[string]int {
	t.Helper()
	stats := map[string]int{}
	for _, line := range strings.Split(c.Info(ctx, "commandstats").Val(), "\n") {
		var calls int
		name, rest, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if _, err := fmt.Sscanf(rest, "%d", &calls); err == nil {
			stats[name] = calls
		}
	}
	if len(stats) == 0 {
		t.Fatal("INFO commandstats: nothing read")
	}
	return stats
}
