// The stores of the verify tests: a URL (or a private server) per test
// server of the LEASE_TEST_* variables, in one place for the register runs,
// the workloads, the long runs and the partitions. Each skips the test, like
// the stores' own tests, when its server is not set up.

package verify_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease/internal/testport"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/verify"
)

// redisURL is the shared Redis server's database 0.
func redisURL(t *testing.T) string {
	return "redis://" + leasetest.Env(t, "LEASE_TEST_REDIS_ADDR") + "/0"
}

// postgresURL is the shared PostgreSQL server's DSN in mode ("" for table
// mode, "advisory").
func postgresURL(t *testing.T, mode string) string {
	dsn := leasetest.Env(t, "LEASE_TEST_POSTGRES_DSN")
	if mode == "" {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("LEASE_TEST_POSTGRES_DSN: %v", err)
	}
	q := u.Query()
	q.Set("mode", mode)
	u.RawQuery = q.Encode()
	return u.String()
}

// postgresRegister is a register row on the shared PostgreSQL server, named
// name and a unique suffix, removed at cleanup.
func postgresRegister(t *testing.T, name string) string {
	dsn := leasetest.Env(t, "LEASE_TEST_POSTGRES_DSN")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec, cleanup, err := verify.PostgresRegister(ctx, dsn, "leasekit_verify_register", name+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cleanup(context.Background()) })
	return spec
}

// mysqlURL turns LEASE_TEST_MYSQL_DSN, a go-sql-driver DSN, into a mysql://
// URL in mode ("table", "getlock"). The DSN's tls choice is spelled out (the
// driver's default is false), for leaseurl would otherwise require TLS of
// the server behind a relay on a namespace bridge.
func mysqlURL(t *testing.T, mode string) string {
	cfg, err := mysql.ParseDSN(leasetest.Env(t, "LEASE_TEST_MYSQL_DSN"))
	if err != nil {
		t.Fatalf("LEASE_TEST_MYSQL_DSN: %v", err)
	}
	tls := cfg.TLSConfig
	if tls == "" {
		tls = "false"
	}
	u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName,
		RawQuery: url.Values{"mode": {mode}, "tls": {tls}}.Encode()}
	if cfg.Passwd == "" {
		u.User = url.User(cfg.User)
	}
	return u.String()
}

// etcdURL is the shared etcd server's first endpoint.
func etcdURL(t *testing.T) string {
	return "etcd://" + strings.Split(leasetest.Env(t, "LEASE_TEST_ETCD_ENDPOINTS"), ",")[0]
}

// zkURL is the shared ZooKeeper server's first address, with 4 s sessions
// (a paused holder's session outlives it by that much).
func zkURL(t *testing.T) string {
	return "zk://" + strings.Split(leasetest.Env(t, "LEASE_TEST_ZK_SERVERS"), ",")[0] + "?session_timeout=4s"
}

// natsURL is the bucket leasekit-verify on the shared NATS server.
func natsURL(t *testing.T) string {
	return leasetest.Env(t, "LEASE_TEST_NATS_URL") + "/leasekit-verify"
}

// k8sURL is the k8s:// URL of the test apiserver's default namespace.
func k8sURL(t *testing.T) string {
	return "k8s:///default?kubeconfig=" + url.QueryEscape(leasetest.Env(t, "LEASE_TEST_K8S_KUBECONFIG"))
}

// privateRedis is a redis-server without persistence on a loopback port,
// restartable on the same port.
type privateRedis struct {
	t    *testing.T
	port int
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts a privateRedis, killed at cleanup.
func startRedis(t *testing.T) *privateRedis {
	t.Helper()
	leasetest.Env(t, "LEASE_TEST_REDIS_ADDR") // skip like the other Redis tests when Redis is not set up
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	srv := &privateRedis{t: t, port: freePort(t)}
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.kill)
	return srv
}

func (r *privateRedis) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

func (r *privateRedis) url() string { return "redis://" + r.addr() + "/0" }

// restart is Config.Restart: a kill and a start on the same port.
func (r *privateRedis) restart(context.Context) error { r.kill(); return r.start() }

func (r *privateRedis) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.t.TempDir(), "--logfile", "")
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(r.done)
	for i := 0; i < 500; i++ {
		c, err := net.DialTimeout("tcp", r.addr(), 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on port %d did not come up", r.port)
}

func (r *privateRedis) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		_ = r.cmd.Process.Kill()
		<-r.done
		r.cmd = nil
	}
}

func freePort(t *testing.T) int { return testport.One(t) }
