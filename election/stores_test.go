// The stores the cross-process election tests run on: each is opened from
// the LEASE_TEST_* environment by the test and, identically, by its helper
// processes.

package election_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/etcdlease"
	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/natslease"
	"github.com/leasekit/lease/pglease"
	"github.com/leasekit/lease/redislease"
	"github.com/leasekit/lease/zklease"
)

// storeKind is one store the cross-process tests run on.
type storeKind struct {
	name string
	env  string        // the server's environment variable ("" for files)
	ttl  time.Duration // the lease TTL: the store's practical minimum
}

var storeKinds = []storeKind{
	{"file", "", 500 * time.Millisecond},
	{"redis", "LEASE_TEST_REDIS_ADDR", 500 * time.Millisecond},
	{"pg-table", "LEASE_TEST_POSTGRES_DSN", 500 * time.Millisecond},
	{"pg-advisory", "LEASE_TEST_POSTGRES_DSN", 500 * time.Millisecond},
	{"etcd", "LEASE_TEST_ETCD_ENDPOINTS", etcdlease.MinTTL},
	{"zk", "LEASE_TEST_ZK_SERVERS", time.Second},
	{"nats", "LEASE_TEST_NATS_URL", 500 * time.Millisecond},
}

// zkSession is the ZooKeeper session timeout; the TTL must not exceed it.
const zkSession = 6 * time.Second

// openStore opens a store of kind over namespace ns (for files: a directory).
// close closes it and whatever connection it was opened on.
func openStore(ctx context.Context, kind, ns string) (s driver.Store, closeAll func(), err error) {
	switch kind {
	case "file":
		fs, err := filelease.New(ns)
		if err != nil {
			return nil, nil, err
		}
		return fs, func() { _ = fs.Close() }, nil
	case "redis":
		c := redis.NewClient(&redis.Options{Addr: os.Getenv("LEASE_TEST_REDIS_ADDR")})
		rs, err := redislease.New(c, redislease.WithPrefix("electiontest:"+ns+":"))
		if err != nil {
			_ = c.Close()
			return nil, nil, err
		}
		return rs, func() { _ = rs.Close(); _ = c.Close() }, nil
	case "pg-table", "pg-advisory":
		pool, err := pgxpool.New(ctx, os.Getenv("LEASE_TEST_POSTGRES_DSN"))
		if err != nil {
			return nil, nil, err
		}
		mode := pglease.ModeTable
		if kind == "pg-advisory" {
			mode = pglease.ModeAdvisory
		}
		ps, err := pglease.New(pool, pglease.WithMode(mode), pglease.WithNamespace(ns))
		if err == nil {
			err = ps.Migrate(ctx) // CREATE TABLE IF NOT EXISTS
		}
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return ps, func() { _ = ps.Close(); pool.Close() }, nil
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   strings.Split(os.Getenv("LEASE_TEST_ETCD_ENDPOINTS"), ","),
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			return nil, nil, err
		}
		es, err := etcdlease.New(cli, etcdlease.WithPrefix("/leasekit-election-test/"+ns+"/"))
		if err != nil {
			_ = cli.Close()
			return nil, nil, err
		}
		return es, func() { _ = es.Close(); _ = cli.Close() }, nil
	case "zk":
		zs, err := zklease.Dial(ctx, strings.Split(os.Getenv("LEASE_TEST_ZK_SERVERS"), ","), zkSession,
			zklease.WithRoot("/leasekit-election-test/"+ns))
		if err != nil {
			return nil, nil, err
		}
		return zs, func() { _ = zs.Close() }, nil
	case "nats":
		nc, err := nats.Connect(os.Getenv("LEASE_TEST_NATS_URL"))
		if err != nil {
			return nil, nil, err
		}
		js, err := jetstream.New(nc)
		if err == nil {
			var nst *natslease.Store
			if nst, err = natslease.New(ctx, js, natslease.WithNamespace(ns)); err == nil {
				return nst, func() { _ = nst.Close(); nc.Close() }, nil
			}
		}
		nc.Close()
		return nil, nil, err
	}
	return nil, nil, fmt.Errorf("unknown store kind %q", kind)
}

// testStore opens a store of kind k over ns for a test, skipping it when the
// server is not configured (failing under LEASE_TEST_REQUIRE_ALL=1); it is
// closed at cleanup.
func testStore(t *testing.T, k storeKind, ns string) driver.Store {
	t.Helper()
	if k.env != "" {
		leasetest.Env(t, k.env)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, closeAll, err := openStore(ctx, k.name, ns)
	if err != nil {
		t.Fatalf("opening the %s store: %v", k.name, err)
	}
	t.Cleanup(closeAll)
	return s
}

// cleanupRedis deletes the keys of namespace ns in Redis.
func cleanupRedis(t *testing.T, ns string) {
	addr := os.Getenv("LEASE_TEST_REDIS_ADDR")
	if addr == "" {
		return
	}
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, "electiontest:"+ns+":*", 100).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
}
