// The systems under test: leasekit on each store and the peer libraries, all
// behind one small Locker interface. Each worker gets its own Locker with its
// own connection, session or client, as a separate process would have.

package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	leasesv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/etcdlease"
	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/k8slease"
	"github.com/leasekit/lease/memlease"
	"github.com/leasekit/lease/mysqllease"
	"github.com/leasekit/lease/natslease"
	"github.com/leasekit/lease/pglease"
	"github.com/leasekit/lease/redislease"
	"github.com/leasekit/lease/zklease"
)

// Locker is one worker's handle on one key.
type Locker interface {
	// Lock waits until the key is held (with the system's own waiting
	// strategy) or ctx ends, and returns the function that releases it.
	Lock(ctx context.Context) (unlock func(context.Context) error, err error)
	// Close frees the handle's connections.
	Close() error
}

// System is one library on one store.
type System struct {
	Name  string // results.json "system"
	Store string // results.json "store"
	// Note describes the configuration in the report.
	Note string
	// New makes one worker's Locker on key with the given TTL.
	New func(ctx context.Context, env *Env, key string, ttl time.Duration) (Locker, error)
	// Wait is false for a system that cannot wait (NoRetry): cycle only.
	Wait bool
	// MinTTL is the shortest TTL the system supports (etcd: whole seconds).
	MinTTL time.Duration
}

// Key returns the system's id "system/store".
func (s System) Key() string { return s.Name + "/" + s.Store }

// allSystems lists every system in report order.
func allSystems() []System {
	lk := leasekitSystem
	rl := func(name, note string, strategy func() redislock.RetryStrategy, wait bool) System {
		return System{Name: name, Store: "redis", Note: note, Wait: wait,
			New: func(ctx context.Context, env *Env, key string, ttl time.Duration) (Locker, error) {
				rdb := newCountedRedis(env.RedisAddr, counterFor(name+"/redis"))
				return &redislockLocker{rdb: rdb, c: redislock.New(rdb), key: key, ttl: ttl, strategy: strategy}, nil
			}}
	}
	return []System{
		lk("redis", "redislease, one go-redis client per worker, Pub/Sub wake-ups", 0),
		lk("postgres-table", "pglease table mode, one pgxpool (4 conns) per worker, LISTEN/NOTIFY", 0),
		lk("postgres-advisory", "pglease advisory mode, one pgxpool (4 conns) per worker", 0),
		lk("mysql-table", "mysqllease table mode, one database/sql pool per worker, no wake-ups (polling)", 0),
		lk("mysql-getlock", "mysqllease GET_LOCK mode, one pool per worker and a connection per held lease, no wake-ups", time.Second),
		lk("etcd", "etcdlease, one etcd client per worker, prefix watch", 2*time.Second),
		lk("zookeeper", "zklease.Dial, one session per worker (session timeout = TTL)", 0),
		lk("nats", "natslease on a JetStream KV bucket, one NATS connection per worker, KV watch", 0),
		lk("file", "filelease on a local temp directory, inotify wake-ups", 0),
		lk("k8s", "k8slease, one clientset per worker (QPS 1000), watch wake-ups, FIFO by a Lease object per waiter", time.Second),
		{Name: "raw", Store: "redis", Wait: true, Note: "go-redis SET NX PX + Lua compare-and-delete, 10 ms polling",
			New: func(ctx context.Context, env *Env, key string, ttl time.Duration) (Locker, error) {
				return &rawLocker{rdb: newCountedRedis(env.RedisAddr, counterFor("raw/redis")), key: key, ttl: ttl}, nil
			}},
		{Name: "raw-fenced", Store: "redis", Note: "the least a fenced lock costs: one Lua script (SET NX PX, then INCR of a fence key) + Lua compare-and-delete; cycle only",
			New: func(ctx context.Context, env *Env, key string, ttl time.Duration) (Locker, error) {
				return &rawLocker{rdb: newCountedRedis(env.RedisAddr, counterFor("raw-fenced/redis")), key: key, ttl: ttl, fence: fenceScript}, nil
			}},
		{Name: "raw-fenced-multi", Store: "redis", Note: "a fence without a script: MULTI, SET NX PX, INCR of a fence key, EXEC (the counter grows on failed attempts too) + Lua compare-and-delete; cycle only",
			New: func(ctx context.Context, env *Env, key string, ttl time.Duration) (Locker, error) {
				return &rawLocker{rdb: newCountedRedis(env.RedisAddr, counterFor("raw-fenced-multi/redis")), key: key, ttl: ttl, fence: fenceMulti}, nil
			}},
		{Name: "raw-fenced-pipe", Store: "redis", Note: "what the fence's counter alone costs, not atomic (so not a safe fence: other clients' commands may run between the two): a pipeline of SET NX PX and INCR of a fence key + Lua compare-and-delete; cycle only",
			New: func(ctx context.Context, env *Env, key string, ttl time.Duration) (Locker, error) {
				return &rawLocker{rdb: newCountedRedis(env.RedisAddr, counterFor("raw-fenced-pipe/redis")), key: key, ttl: ttl, fence: fencePipe}, nil
			}},
		rl("redislock-noretry", "bsm/redislock v0.9.4, NoRetry (cycle only: it cannot wait)",
			redislock.NoRetry, false),
		rl("redislock-linear", "bsm/redislock v0.9.4, LinearBackoff(100ms), fresh per Obtain",
			func() redislock.RetryStrategy { return redislock.LinearBackoff(100 * time.Millisecond) }, true),
		rl("redislock-exp", "bsm/redislock v0.9.4, ExponentialBackoff(4ms, 512ms), fresh per Obtain",
			func() redislock.RetryStrategy {
				return redislock.ExponentialBackoff(4*time.Millisecond, 512*time.Millisecond)
			}, true),
		{Name: "redsync", Store: "redis", Wait: true, Note: "go-redsync v4.18.1, defaults (32 tries, 50-250 ms delay), one pool, expiry = TTL",
			New: func(ctx context.Context, env *Env, key string, ttl time.Duration) (Locker, error) {
				rdb := newCountedRedis(env.RedisAddr, counterFor("redsync/redis"))
				rs := redsync.New(goredis.NewPool(rdb))
				return &redsyncLocker{rdb: rdb, m: rs.NewMutex("bench:redsync:"+key, redsync.WithExpiry(ttl))}, nil
			}},
		{Name: "etcd-mutex", Store: "etcd", Wait: true, MinTTL: 2 * time.Second,
			Note: "etcd client v3.5 concurrency.Mutex, one session (TTL in s) per worker",
			New:  newEtcdMutex},
		{Name: "zk-lock", Store: "zookeeper", Wait: true, Note: "go-zookeeper/zk v1.0.4 zk.Lock, one connection per worker (session timeout = TTL)",
			New: newZKLock},
	}
}

// leasekitSystem is leasekit on store: one lease.Client and store per worker.
func leasekitSystem(store, note string, minTTL time.Duration) System {
	return System{Name: "leasekit", Store: store, Note: note, Wait: true, MinTTL: minTTL,
		New: func(ctx context.Context, env *Env, key string, ttl time.Duration) (Locker, error) {
			st, cleanup, err := newLeaseStoreWith(ctx, env, store, ttl, hooksFor(store, counterFor("leasekit/"+store)))
			if err != nil {
				return nil, err
			}
			c, err := lease.New(st, lease.WithTTL(ttl))
			if err != nil {
				_ = st.Close()
				cleanup()
				return nil, err
			}
			return &leaseLocker{c: c, st: st, cleanup: cleanup, key: key}, nil
		}}
}

func newRedis(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: 8})
}

// newCountedRedis is newRedis counting its round trips in w.
func newCountedRedis(addr string, w *wire) *redis.Client {
	rdb := newRedis(addr)
	rdb.AddHook(redisHook{w})
	return rdb
}

// ---------------------------------------------------------------- leasekit

type leaseLocker struct {
	c       *lease.Client
	st      driver.Store
	cleanup func()
	key     string
}

func (l *leaseLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	ls, err := l.c.Acquire(ctx, l.key)
	if err != nil {
		return nil, err
	}
	return ls.Release, nil
}

func (l *leaseLocker) Close() error {
	err := l.c.Close()
	err = errors.Join(err, l.st.Close())
	l.cleanup()
	return err
}

func nop() {}

// storeHooks let the heartbeat scenario count round trips on the wire.
type storeHooks struct {
	redisHook  redis.Hook
	redisAddr  string // overrides env.RedisAddr (a private server)
	pgTracer   *pgCounter
	pgConns    int32 // pool size (default 4)
	etcdDialer []grpcDialOption
	zkDialer   zk.Dialer
}

// newLeaseStoreWith makes a leasekit store of the given kind with its own
// connection(s), with h's counters attached, and the function that closes
// those connections after the store. The store is returned as is (not
// wrapped), so the Client sees every optional interface it implements.
func newLeaseStoreWith(ctx context.Context, env *Env, store string, ttl time.Duration, h storeHooks) (driver.Store, func(), error) {
	ns := "bench-" + env.Run + "-" + store // table and advisory mode share the table
	switch store {
	case "redis":
		addr := env.RedisAddr
		if h.redisAddr != "" {
			addr = h.redisAddr
		}
		rdb := newRedis(addr)
		if h.redisHook != nil {
			rdb.AddHook(h.redisHook)
		}
		st, err := redislease.New(rdb, redislease.WithPrefix("bench:"+env.Run+":"))
		if err != nil {
			return nil, nil, err
		}
		return st, func() { _ = rdb.Close() }, nil
	case "postgres-table", "postgres-advisory":
		mode := pglease.ModeTable
		if store == "postgres-advisory" {
			mode = pglease.ModeAdvisory
		}
		conns := h.pgConns
		if conns == 0 {
			conns = 4
		}
		pool, err := newPGPool(ctx, env.PGDSN, conns, h.pgTracer)
		if err != nil {
			return nil, nil, err
		}
		st, err := pglease.New(pool, pglease.WithMode(mode), pglease.WithTable(env.PGTable()), pglease.WithNamespace(ns), pglease.WithMaxIdleConns(1))
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return st, pool.Close, nil
	case "mysql-table", "mysql-getlock":
		db, err := openMySQL(env.MySQLDSN)
		if err != nil {
			return nil, nil, err
		}
		mode := mysqllease.ModeTable
		if store == "mysql-getlock" {
			mode = mysqllease.ModeGetLock
		}
		st, err := mysqllease.New(db, mysqllease.WithMode(mode), mysqllease.WithNamespace(ns))
		if err == nil {
			err = st.Migrate(ctx) // the default table: CREATE TABLE IF NOT EXISTS
		}
		if err != nil {
			_ = db.Close()
			return nil, nil, err
		}
		return st, func() { _ = db.Close() }, nil
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: env.Etcd, DialTimeout: 5 * time.Second, DialOptions: h.etcdDialer, Logger: zap.NewNop()})
		if err != nil {
			return nil, nil, err
		}
		st, err := etcdlease.New(cli, etcdlease.WithPrefix("/leasekit-bench/"+env.Run+"/"))
		if err != nil {
			_ = cli.Close()
			return nil, nil, err
		}
		return st, func() { _ = cli.Close() }, nil
	case "zookeeper":
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		opts := []zklease.Option{zklease.WithRoot("/leasekit-bench/" + env.Run)}
		if h.zkDialer != nil {
			opts = append(opts, zklease.WithDialer(h.zkDialer))
		}
		st, err := zklease.Dial(dctx, env.ZK, zkSession(ttl), opts...)
		return st, nop, err
	case "nats":
		nc, err := nats.Connect(env.NATS)
		if err != nil {
			return nil, nil, err
		}
		js, err := jetstream.New(nc)
		if err == nil {
			var st *natslease.Store
			if st, err = natslease.New(ctx, js, natslease.WithBucket("leasekit-bench"), natslease.WithNamespace(ns)); err == nil {
				return st, nc.Close, nil
			}
		}
		nc.Close()
		return nil, nil, err
	case "file":
		st, err := filelease.New(env.FileDir)
		return st, nop, err
	case "k8s":
		cfg, err := clientcmd.BuildConfigFromFlags("", env.Kube)
		if err != nil {
			return nil, nil, err
		}
		cfg.QPS, cfg.Burst = 1000, 2000
		cs, err := leasesv1.NewForConfig(cfg)
		if err != nil {
			return nil, nil, err
		}
		st, err := k8slease.New(cs, "default", k8slease.WithPrefix("leasekit-bench-"+strings.ToLower(env.Run)+"."))
		return st, nop, err
	case "memory":
		return sharedMem(env.Run).Handle(), nop, nil
	}
	return nil, nil, fmt.Errorf("unknown store %q", store)
}

var (
	memMu     sync.Mutex
	memStores = map[string]*memlease.Store{}
)

// sharedMem returns the one in-memory store of a run (smoke tests only).
func sharedMem(run string) *memlease.Store {
	memMu.Lock()
	defer memMu.Unlock()
	if s := memStores[run]; s != nil {
		return s
	}
	s := memlease.New()
	memStores[run] = s
	return s
}

// zkSession is the session timeout used with a TTL: the TTL itself (the
// store's maximum), at least 2 s.
func zkSession(ttl time.Duration) time.Duration { return max(ttl, 2*time.Second) }

func newPGPool(ctx context.Context, dsn string, conns int32, tracer *pgCounter) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse DSN: %w", errors.New("invalid LEASE_TEST_POSTGRES_DSN")) // never echo the DSN
	}
	cfg.MaxConns = conns
	cfg.MinConns = 0
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// ---------------------------------------------------------------- raw

const rawUnlock = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`

var rawUnlockScript = redis.NewScript(rawUnlock)

// rawFencedLock takes KEYS[1] for token ARGV[1] for ARGV[2] ms if it is free
// and returns the next value of the fence counter KEYS[2], or 0.
const rawFencedLock = `if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return redis.call("incr", KEYS[2]) end return 0`

var rawFencedLockScript = redis.NewScript(rawFencedLock)

// rawFence is how a rawLocker takes its fence, if it takes one.
type rawFence int

const (
	fenceNone   rawFence = iota // SET NX PX alone: the raw floor
	fenceScript                 // rawFencedLock
	fenceMulti                  // MULTI, SET NX PX, INCR, EXEC
	fencePipe                   // SET NX PX and INCR pipelined, not atomic
)

// rawLocker is the raw floor: SET NX PX (or, fenced, SET NX PX with an INCR
// of a fence counter: see rawFence) and a compare-and-delete, polling every
// 10 ms.
type rawLocker struct {
	rdb   *redis.Client
	key   string
	ttl   time.Duration
	fence rawFence // fenced: the key and its counter share a hash tag
}

// rawKeys names each rawFence's lease key prefix.
var rawKeys = [...]string{
	fenceNone:   "bench:raw:",
	fenceScript: "bench:raw-fenced:",
	fenceMulti:  "bench:raw-fenced-multi:",
	fencePipe:   "bench:raw-fenced-pipe:",
}

func (r *rawLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	token := randToken()
	key := rawKeys[r.fence] + r.key
	if r.fence != fenceNone { // a hash tag: the counter's slot is the key's
		key = rawKeys[r.fence] + "{" + r.key + "}"
	}
	for {
		var ok bool
		var err error
		switch r.fence {
		case fenceMulti, fencePipe:
			var set *redis.BoolCmd
			var incr *redis.IntCmd
			pipelined := r.rdb.TxPipelined
			if r.fence == fencePipe {
				pipelined = r.rdb.Pipelined
			}
			_, err = pipelined(ctx, func(p redis.Pipeliner) error {
				set = p.SetNX(ctx, key, token, r.ttl)
				incr = p.Incr(ctx, key+":fence")
				return nil
			})
			// A failed attempt increments the counter too: fences still
			// grow from one holder to the next.
			ok = err == nil && set.Val() && incr.Val() > 0
		case fenceScript:
			var fence int64
			fence, err = rawFencedLockScript.Run(ctx, r.rdb, []string{key, key + ":fence"}, token, r.ttl.Milliseconds()).Int64()
			ok = fence > 0
		default:
			ok, err = r.rdb.SetNX(ctx, key, token, r.ttl).Result()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		} else if ok {
			return func(ctx context.Context) error {
				return rawUnlockScript.Run(ctx, r.rdb, []string{key}, token).Err()
			}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (r *rawLocker) Close() error { return r.rdb.Close() }

// ---------------------------------------------------------------- redislock

type redislockLocker struct {
	rdb      *redis.Client
	c        *redislock.Client
	key      string
	ttl      time.Duration
	strategy func() redislock.RetryStrategy
}

func (r *redislockLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	l, err := r.obtain(ctx)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// obtain waits for the key with a fresh strategy per Obtain.
func (r *redislockLocker) obtain(ctx context.Context) (*redislock.Lock, error) {
	for {
		// A fresh strategy per Obtain: the backoff strategies keep state.
		// Without a ctx deadline Obtain gives up after the TTL; loop then.
		l, err := r.c.Obtain(ctx, "bench:redislock:"+r.key, r.ttl, &redislock.Options{RetryStrategy: r.strategy()})
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// ErrNotObtained, or the deadline Obtain set itself (the TTL) expiring
		// mid-request: keep waiting, as a caller would.
		if !errors.Is(err, redislock.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
	}
}

func (r *redislockLocker) Close() error { return r.rdb.Close() }

// ---------------------------------------------------------------- redsync

type redsyncLocker struct {
	rdb *redis.Client
	m   *redsync.Mutex
}

func (r *redsyncLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	for {
		err := r.m.LockContext(ctx)
		if err == nil {
			return func(ctx context.Context) error {
				_, err := r.m.UnlockContext(ctx)
				return err
			}, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// ErrFailed after its 32 tries: try again, as a caller would.
	}
}

func (r *redsyncLocker) Close() error { return r.rdb.Close() }

// ---------------------------------------------------------------- etcd Mutex

type etcdMutex struct {
	cli  *clientv3.Client
	sess *concurrency.Session
	m    *concurrency.Mutex
}

func newEtcdMutex(ctx context.Context, env *Env, key string, ttl time.Duration) (Locker, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: env.Etcd, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: grpcCounting(counterFor("etcd-mutex/etcd"))})
	if err != nil {
		return nil, err
	}
	secs := max(int((ttl+time.Second-1)/time.Second), 1)
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(secs), concurrency.WithContext(context.Background()))
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return &etcdMutex{cli: cli, sess: sess, m: concurrency.NewMutex(sess, "/bench-mutex/"+env.Run+"/"+key)}, nil
}

func (e *etcdMutex) Lock(ctx context.Context) (func(context.Context) error, error) {
	if err := e.m.Lock(ctx); err != nil {
		return nil, err
	}
	return e.m.Unlock, nil
}

func (e *etcdMutex) Close() error {
	_ = e.sess.Close() // revokes the session lease (bounded by the client's timeouts)
	return e.cli.Close()
}

// ---------------------------------------------------------------- zk.Lock

type zkLock struct {
	conn *zk.Conn
	l    *zk.Lock
	once sync.Once
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

func newZKLock(ctx context.Context, env *Env, key string, ttl time.Duration) (Locker, error) {
	// Wait for the session so that the first Lock measures the lock only.
	conn, err := dialZK(ctx, env, ttl, counterFor("zk-lock/zookeeper"))
	if err != nil {
		return nil, err
	}
	return &zkLock{conn: conn, l: zk.NewLock(conn, "/bench-zklock/"+env.Run+"/"+key, zk.WorldACL(zk.PermAll))}, nil
}

// dialZK connects to ZooKeeper with the session timeout of ttl, counting
// writes in w, and returns once the session is established; later events
// are drained.
func dialZK(ctx context.Context, env *Env, ttl time.Duration, w *wire) (*zk.Conn, error) {
	conn, events, err := zk.Connect(env.ZK, zkSession(ttl), zk.WithLogger(quietLogger{}), zk.WithDialer(zkDialer(w)))
	if err != nil {
		return nil, err
	}
	deadline := time.After(15 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return conn, nil
			}
		case <-deadline:
			conn.Close()
			return nil, errors.New("zk: no session within 15s")
		case <-ctx.Done():
			conn.Close()
			return nil, ctx.Err()
		}
	}
}

func (z *zkLock) Lock(ctx context.Context) (func(context.Context) error, error) {
	// zk.Lock takes no context. When ctx ends first (a contention round is
	// over and every worker stops), the queue drains within a few
	// hand-offs: take the lock when its turn comes and give it back at once,
	// so the Locker stays usable for the next round. Should that take long,
	// close the connection (the Locker is then broken for good).
	done := make(chan error, 1)
	go func() { done <- z.l.Lock() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return func(context.Context) error { return z.l.Unlock() }, nil
	case <-ctx.Done():
		select {
		case err := <-done:
			if err == nil {
				_ = z.l.Unlock()
			}
		case <-time.After(10 * time.Second):
			z.once.Do(z.conn.Close)
			<-done
		}
		return nil, ctx.Err()
	}
}

func (z *zkLock) Close() error {
	z.once.Do(z.conn.Close)
	return nil
}

// randToken returns a random token for the raw lock.
func randToken() string { return rand.Text() } // crypto/rand: 128 bits, never fails

// openMySQL opens a database/sql pool on a go-sql-driver DSN, with
// interpolateParams=true (one round trip a statement) unless it says
// otherwise.
func openMySQL(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("LEASE_TEST_MYSQL_DSN: %w", err)
	}
	if !strings.Contains(dsn, "interpolateParams") {
		cfg.InterpolateParams = true
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}
