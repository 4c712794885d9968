// The redis+cluster:// and redis+sentinel:// schemes against private
// servers: a one-node Redis Cluster, and a password-protected primary under
// a sentinel without one; replica_ack and the parsing errors.

package leaseurl_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/leaseurl"
	"github.com/leasekit/lease/redislease"
)

func freeAddr(t *testing.T) (string, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	return "127.0.0.1:" + strconv.Itoa(p), p
}

// startRedis runs redis-server with args (no persistence, loopback) until
// the test ends and returns its address once it answers.
func startRedis(t *testing.T, args ...string) string {
	t.Helper()
	leasetest.Env(t, "LEASE_TEST_REDIS_ADDR")
	addr, port := freeAddr(t)
	dir := t.TempDir()
	if len(args) > 0 && strings.HasSuffix(args[0], ".conf") {
		args = append(args[:1:1], append([]string{"--port", strconv.Itoa(port)}, args[1:]...)...)
	} else {
		args = append([]string{"--port", strconv.Itoa(port), "--save", "", "--appendonly", "no"}, args...)
	}
	args = append(args, "--bind", "127.0.0.1", "--dir", dir, "--logfile", filepath.Join(dir, "log"))
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return addr
		}
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Fatalf("redis-server exited:\n%s", b)
		default:
		}
		if i > 500 {
			t.Fatalf("redis-server on %s not up", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRedisCluster(t *testing.T) {
	_, bus := freeAddr(t)
	addr := startRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(bus), "--requirepass", secret)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr, Password: secret})
	defer c.Close()
	if err := c.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	for c.ClusterInfo(ctx).Val() == "" || !strings.Contains(c.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if ctx.Err() != nil {
			t.Fatal("cluster not ok")
		}
		time.Sleep(50 * time.Millisecond)
	}
	url := fmt.Sprintf("redis+cluster://:%s@%s,127.0.0.1:1/?prefix=leaseurl-%d:&dial_timeout=2s", secret, addr, time.Now().UnixNano())
	shareKeys(t, url)
	s, err := leaseurl.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rs, ok := leaseurl.Unwrap(s).(*redislease.Store)
	if _, cluster := rs.Client().(*redis.ClusterClient); !ok || !cluster {
		t.Fatalf("redis+cluster:// opened %T with a %T client", leaseurl.Unwrap(s), rs.Client())
	}
	// Without replicas, replica_ack=1 refuses every write (WAIT on the key's node).
	sa, err := leaseurl.Open(ctx, strings.Replace(url, "?", "?replica_ack=1&replica_ack_timeout=50ms&", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	_, err = sa.Acquire(ctx, driver.Request{Key: "k", Token: "t0123456789", Holder: "h", TTL: time.Second})
	if !errors.Is(err, redislease.ErrReplicaAck) {
		t.Errorf("Acquire with replica_ack=1 and no replica = %v, want ErrReplicaAck", err)
	}
	// A wrong password: the error never shows it.
	bad, err := leaseurl.Open(ctx, strings.Replace(url, secret, "wrong-"+secret, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.Inspect(ctx, "k"); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Inspect with a wrong password = %v", err)
	}
}

func TestRedisSentinel(t *testing.T) {
	primary := startRedis(t, "--requirepass", secret)
	host, port, _ := net.SplitHostPort(primary)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	if err := os.WriteFile(conf, []byte("sentinel monitor lk "+host+" "+port+" 1\nsentinel auth-pass lk "+secret+"\nrequirepass sentinel-"+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sentinel := startRedis(t, conf, "--sentinel")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := fmt.Sprintf("leaseurl-%d:", time.Now().UnixNano())
	// userinfo: the data nodes' password; sentinel_password: the sentinel's.
	sp := "&sentinel_password=sentinel-" + secret
	url := fmt.Sprintf("redis+sentinel://:%s@%s/lk?prefix=%s", secret, sentinel, prefix) + sp
	shareKeys(t, url)
	shareKeys(t, fmt.Sprintf("redis+sentinel://:%s@%s,127.0.0.1:1/lk/0?prefix=%s&dial_timeout=2s", secret, sentinel, prefix)+sp)
	// The keys are on the primary the sentinel names, in db 0; db 1 is empty.
	c := redis.NewClient(&redis.Options{Addr: primary, Password: secret})
	defer c.Close()
	s1, err := leaseurl.Open(ctx, fmt.Sprintf("redis+sentinel://:%s@%s/lk/1?prefix=%s", secret, sentinel, prefix)+sp)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	if _, err := s1.Acquire(ctx, driver.Request{Key: "db1", Token: "t0123456789", Holder: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if n := c.Do(ctx, "select", 1).Err(); n != nil {
		t.Fatal(n)
	}
	if info := c.Info(ctx, "keyspace").Val(); !strings.Contains(info, "db1:keys=") {
		t.Errorf("no key in db 1 of the primary:\n%s", info)
	}
	// Without the sentinel's password, the primary cannot be found (the
	// data nodes' password is not sent to the sentinel).
	bad, err := leaseurl.Open(ctx, fmt.Sprintf("redis+sentinel://:%s@%s/lk", secret, sentinel))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.Inspect(ctx, "k"); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Inspect without the sentinel's password = %v", err)
	}
}

func TestRedisMultiURLErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ url, text string }{
		{"redis+cluster://u:" + secret + "@h:1/3", "no path"},
		{"redis+cluster://", "no host"},
		{"redis+cluster://h:1/?bogus=1", "bogus"},
		{"redis+sentinel://u:" + secret + "@h:1", "names the primary"},
		{"redis+sentinel://h:1/m/0/x", "names the primary"},
		{"redis+sentinel://h:1/m?master_name=x", "master name"},
		{"redis+sentinel://h:1/m?password=" + secret, "userinfo"},
		{"redis+sentinel://h:1/m?bogus=1", "bogus"},
		{"redis+sentinel://h:1/m/zero", "database"},
		{"redis://h:1/?replica_ack=many", "replica_ack"},
		{"redis://h:1/?replica_ack=1&replica_ack_timeout=soon", "replica_ack_timeout"},
		{"redis://h:1/?replica_ack=-1", "negative"},
		{"redis://h:1/?replica_ack=1&replica_ack_timeout=0s", "zero timeout"},
		{"rediss+cluster://h:1/?replica_ack=1&replica_ack_timeout=1h", "ReadTimeout"},
		{"mem://x?replica_ack=1", "do not apply"},
	} {
		s, err := leaseurl.Open(ctx, tc.url)
		if err == nil {
			_ = s.Close()
			t.Errorf("Open(%q) succeeded", leaseurl.Redact(tc.url))
			continue
		}
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), tc.text) || strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%q) = %v, want ErrInvalid mentioning %q, without the password", leaseurl.Redact(tc.url), err, tc.text)
		}
	}
}
