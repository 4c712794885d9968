// Scenario 8 (issue #26): many keys at once. 64 goroutines of one process
// share one handle (leasekit: one Client; redislock and redsync: one go-redis
// client; etcd-mutex: one session; zk-lock: one connection) and each
// acquires and releases keys of its own from a set of 10,000 in a loop.
// Measures operations (an acquisition and its release) per second, their
// latency, the client's requests per operation on the wire and, where the
// server's process can be read, its CPU time per operation.

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/pglease"
)

// mkTTL is the lease TTL of the many-keys scenario (etcd sessions: whole
// seconds; ZooKeeper: the session timeout).
const mkTTL = 10 * time.Second

// mkLocker is one process's shared handle: every worker locks its keys
// through it.
type mkLocker interface {
	Lock(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	Close() error
}

// mkServer is where a system's server CPU is read: the redis-server's INFO
// (redisAddr), the processes listening on ports (listen) or the PostgreSQL
// backends of the handle's connections (pgPIDs).
type mkServer struct {
	redisAddr string
	listen    []string
	pgPIDs    *pidSet
}

// mkSystem is one library on one store in the many-keys scenario.
type mkSystem struct {
	Name, Store, Note string
	// New makes the process's one handle; w counts its requests on the wire.
	New func(ctx context.Context, env *Env, w *wire, srv *mkServer) (mkLocker, error)
}

func (s mkSystem) Key() string { return s.Name + "/" + s.Store }

// manyKeySystems lists the scenario's systems in run and report order:
// each store's peers right after leasekit on it, so that a server's
// leftover work (expiring sessions, compaction) falls on the same store's
// systems, not on the next store's.
func manyKeySystems() []mkSystem {
	lk := func(store, note string) mkSystem {
		return mkSystem{Name: "leasekit", Store: store, Note: note, New: func(ctx context.Context, env *Env, w *wire, srv *mkServer) (mkLocker, error) {
			return newMKLeasekit(ctx, env, store, w, srv)
		}}
	}
	return []mkSystem{
		lk("redis", "one lease.Client on one redislease store (one go-redis client, pool 8) shared by the 64 workers"),
		{Name: "redislock", Store: "redis", Note: "bsm/redislock v0.9.4 on one shared go-redis client (pool 8), LinearBackoff(10ms)",
			New: func(ctx context.Context, env *Env, w *wire, srv *mkServer) (mkLocker, error) {
				rdb := newCountedRedis(srv.redisAddr, w)
				return &mkRedislock{rdb: rdb, c: redislock.New(rdb)}, nil
			}},
		{Name: "redsync", Store: "redis", Note: "go-redsync v4.18.1 on one shared go-redis client (pool 8), a Mutex per operation, defaults, expiry = TTL",
			New: func(ctx context.Context, env *Env, w *wire, srv *mkServer) (mkLocker, error) {
				rdb := newCountedRedis(srv.redisAddr, w)
				return &mkRedsync{rdb: rdb, rs: redsync.New(goredis.NewPool(rdb))}, nil
			}},
		lk("postgres-table", "one lease.Client on one pglease table-mode store (one pgxpool, 8 conns)"),
		lk("etcd", "one lease.Client on one etcdlease store (one etcd client)"),
		{Name: "etcd-mutex", Store: "etcd", Note: "etcd client v3.5 concurrency.Mutex per operation, one shared session (TTL 10 s)",
			New: newMKEtcdMutex},
		lk("zookeeper", "one lease.Client on one zklease store (one session, timeout = TTL)"),
		{Name: "zk-lock", Store: "zookeeper", Note: "go-zookeeper/zk v1.0.4 zk.Lock per operation, one shared connection (session timeout = TTL)",
			New: newMKZKLock},
		lk("file", "one lease.Client on one filelease store"),
	}
}

// ---------------------------------------------------------------- handles

type mkLeasekit struct {
	c       *lease.Client
	close   func() error
	cleanup func()
}

func newMKLeasekit(ctx context.Context, env *Env, store string, w *wire, srv *mkServer) (mkLocker, error) {
	h := hooksFor(store, w)
	h.redisAddr = srv.redisAddr
	if store == "postgres-table" {
		// Our own pool: its connections' backend pids are the server side
		// to measure.
		pool, err := newMKPGPool(ctx, env.PGDSN, 8, &pgCounter{w}, srv.pgPIDs)
		if err != nil {
			return nil, err
		}
		st, err := pglease.New(pool, pglease.WithMode(pglease.ModeTable), pglease.WithTable(env.PGTable()),
			pglease.WithNamespace("bench-"+env.Run+"-many-keys"))
		if err != nil {
			pool.Close()
			return nil, err
		}
		c, err := lease.New(st, lease.WithTTL(mkTTL))
		if err != nil {
			_ = st.Close()
			pool.Close()
			return nil, err
		}
		return &mkLeasekit{c: c, close: st.Close, cleanup: pool.Close}, nil
	}
	st, cleanup, err := newLeaseStoreWith(ctx, env, store, mkTTL, h)
	if err != nil {
		return nil, err
	}
	c, err := lease.New(st, lease.WithTTL(mkTTL))
	if err != nil {
		_ = st.Close()
		cleanup()
		return nil, err
	}
	return &mkLeasekit{c: c, close: st.Close, cleanup: cleanup}, nil
}

func (m *mkLeasekit) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := m.c.Acquire(ctx, "mk-"+key)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (m *mkLeasekit) Close() error {
	err := errors.Join(m.c.Close(), m.close())
	m.cleanup()
	return err
}

type mkRedislock struct {
	rdb *redis.Client
	c   *redislock.Client
}

func (m *mkRedislock) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := m.c.Obtain(ctx, "bench:mk-redislock:"+key, mkTTL,
		&redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (m *mkRedislock) Close() error { return m.rdb.Close() }

type mkRedsync struct {
	rdb *redis.Client
	rs  *redsync.Redsync
}

func (m *mkRedsync) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	mu := m.rs.NewMutex("bench:mk-redsync:"+key, redsync.WithExpiry(mkTTL))
	if err := mu.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := mu.UnlockContext(ctx)
		return err
	}, nil
}

func (m *mkRedsync) Close() error { return m.rdb.Close() }

type mkEtcdMutex struct {
	cli    *clientv3.Client
	sess   *concurrency.Session
	prefix string
}

func newMKEtcdMutex(ctx context.Context, env *Env, w *wire, srv *mkServer) (mkLocker, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: env.Etcd, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: grpcCounting(w)})
	if err != nil {
		return nil, err
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(mkTTL/time.Second)), concurrency.WithContext(context.Background()))
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return &mkEtcdMutex{cli: cli, sess: sess, prefix: "/bench-mk-mutex/" + env.Run + "/"}, nil
}

func (m *mkEtcdMutex) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	mu := concurrency.NewMutex(m.sess, m.prefix+key)
	if err := mu.Lock(ctx); err != nil {
		return nil, err
	}
	return mu.Unlock, nil
}

func (m *mkEtcdMutex) Close() error {
	_ = m.sess.Close()
	return m.cli.Close()
}

type mkZKLock struct {
	conn   *zk.Conn
	prefix string
}

func newMKZKLock(ctx context.Context, env *Env, w *wire, srv *mkServer) (mkLocker, error) {
	conn, err := dialZK(ctx, env, mkTTL, w)
	if err != nil {
		return nil, err
	}
	return &mkZKLock{conn: conn, prefix: "/bench-mk-zklock/" + env.Run + "/"}, nil
}

func (m *mkZKLock) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	// Uncontended (every key is one worker's): zk.Lock, which takes no
	// context, returns after its create and one listing.
	l := zk.NewLock(m.conn, m.prefix+key, zk.WorldACL(zk.PermAll))
	if err := l.Lock(); err != nil {
		return nil, err
	}
	return func(context.Context) error { return l.Unlock() }, nil
}

func (m *mkZKLock) Close() error {
	m.conn.Close()
	return nil
}

// pidSet records the PostgreSQL backend pids of a pool's connections.
type pidSet struct {
	mu   sync.Mutex
	pids []int
}

func (p *pidSet) add(pid int) {
	p.mu.Lock()
	p.pids = append(p.pids, pid)
	p.mu.Unlock()
}

func (p *pidSet) list() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.pids)
}

func newMKPGPool(ctx context.Context, dsn string, conns int32, tracer *pgCounter, pids *pidSet) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("invalid LEASE_TEST_POSTGRES_DSN") // never echo the DSN
	}
	cfg.MaxConns, cfg.MinConns = conns, 0
	cfg.ConnConfig.Tracer = tracer
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		pids.add(int(c.PgConn().PID()))
		return nil
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// ---------------------------------------------------------------- server CPU

// cpuReading is the server's CPU time by process (0: the redis-server's
// INFO figure).
type cpuReading map[int]time.Duration

// read returns the server's cumulative CPU time, and what was read.
func (s *mkServer) read(ctx context.Context, store string) (cpuReading, string, error) {
	out := cpuReading{}
	switch {
	case store == "redis" && s.redisAddr != "":
		snap := readRedis(ctx, s.redisAddr)
		if !snap.ok {
			return nil, "", errors.New("INFO failed")
		}
		out[0] = snap.cpu
		return out, "private redis-server INFO cpu: used_cpu_user + used_cpu_sys", nil
	case store == "postgres-table" && s.pgPIDs != nil:
		pids := s.pgPIDs.list()
		if len(pids) == 0 {
			return nil, "", errors.New("no backend pid")
		}
		for _, p := range pids {
			d, err := procCPU(p)
			if err != nil {
				return nil, "", fmt.Errorf("backend %d: %w", p, err)
			}
			out[p] = d
		}
		return out, "/proc/<pid>/stat utime+stime of the PostgreSQL backends serving the Client's pool (not the WAL writer, checkpointer or other background processes)", nil
	case len(s.listen) > 0:
		for _, a := range s.listen {
			pid, err := listenerPID(a)
			if err != nil {
				return nil, "", err
			}
			d, err := procCPU(pid)
			if err != nil {
				return nil, "", err
			}
			out[pid] = d
		}
		return out, "/proc/<pid>/stat utime+stime of the server process listening on the endpoint (10 ms ticks)", nil
	}
	return nil, "", errors.New("no server to read")
}

// cpuSince is the CPU time the server used between a and b (processes that
// appeared in between count from zero).
func cpuSince(a, b cpuReading) time.Duration {
	var d time.Duration
	for p, t := range b {
		d += t - a[p]
	}
	return d
}

// ---------------------------------------------------------------- running

// runManyKeys runs each system in turn; redisAddr is the Redis server to
// use ("" leaves the Redis systems out) and whether its CPU can be read
// (a private server).
func runManyKeys(ctx context.Context, env *Env, systems []mkSystem, workers, keys int, dur time.Duration, redisAddr string, redisPrivate bool, logf func(string, ...any)) []Result {
	var out []Result
	for _, s := range systems {
		settle(15 * time.Second)
		srv := &mkServer{}
		switch s.Store {
		case "redis":
			srv.redisAddr = redisAddr
		case "postgres-table":
			srv.pgPIDs = &pidSet{}
		case "etcd":
			srv.listen = env.Etcd
		case "zookeeper":
			srv.listen = env.ZK
		}
		measure := s.Store != "file" && s.Store != "memory" && (s.Store != "redis" || redisPrivate)
		r := runManyKeysOne(ctx, env, s, srv, workers, keys, dur, measure)
		logf("%-13s %-18s %-17s %s", r.Scenario, r.System, r.Store, brief(r))
		out = append(out, r)
	}
	return out
}

func runManyKeysOne(ctx context.Context, env *Env, s mkSystem, srv *mkServer, workers, keys int, dur time.Duration, measureServer bool) Result {
	r := Result{Scenario: "many-keys", System: s.Name, Store: s.Store, Clients: workers, Note: s.Note, TTLMs: ms(mkTTL)}
	w := &wire{}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	h, err := s.New(sctx, env, w, srv)
	cancel()
	if err != nil {
		r.Skipped = "setup: " + err.Error()
		return r
	}
	defer func() {
		done := make(chan struct{})
		go func() { _ = h.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}()
	perWorker := max(keys/workers, 1)
	type workerOut struct {
		lat  []time.Duration
		errs int
		last error
	}
	// phase runs the workers for d; each goes on through its own keys from
	// where the previous phase left it.
	next := make([]int, workers)
	phase := func(d time.Duration) []workerOut {
		outs := make([]workerOut, workers)
		pctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		var wg sync.WaitGroup
		for i := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := &outs[i]
				for pctx.Err() == nil {
					k := (i + workers*(next[i]%perWorker)) % keys
					next[i]++
					octx, ocancel := context.WithTimeout(context.WithoutCancel(pctx), 30*time.Second)
					t0 := time.Now()
					unlock, err := h.Lock(octx, strconv.Itoa(k))
					if err == nil {
						err = unlock(octx)
					}
					el := time.Since(t0)
					ocancel()
					if err != nil {
						o.errs++
						o.last = err
						continue
					}
					o.lat = append(o.lat, el)
				}
			}()
		}
		wg.Wait()
		return outs
	}
	phase(min(max(dur/4, 200*time.Millisecond), time.Second)) // warm-up: connections, subscriptions

	var c0 cpuReading
	var srcNote string
	var srvErr error
	if measureServer {
		c0, srcNote, srvErr = srv.read(ctx, s.Store)
	}
	req0, msg0 := w.n.Load(), w.msgs.Load()
	cpu0, t0 := processCPU(), time.Now()
	outs := phase(dur)
	el, cpu1 := time.Since(t0), processCPU()
	req1, msg1 := w.n.Load(), w.msgs.Load()
	var c1 cpuReading
	if measureServer && srvErr == nil {
		c1, _, srvErr = srv.read(ctx, s.Store)
	}

	var lat []time.Duration
	var last error
	for _, o := range outs {
		lat = append(lat, o.lat...)
		r.Errors += o.errs
		if o.last != nil {
			last = o.last
		}
	}
	ops := len(lat)
	r.Samples, r.DurationS = ops, el.Seconds()
	r.OpsPerS = float64(ops) / el.Seconds()
	r.P50Ms, r.P99Ms, r.MaxMs = summary(lat)
	r.Counters = map[string]any{"keys": workers * min(perWorker, keys), "keys_per_worker": perWorker}
	if last != nil {
		r.Counters["last_error"] = last.Error()
	}
	if ops > 0 {
		// The whole process: the workers, the library and its client.
		r.Counters["client_cpu_us_per_op"] = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(ops)
		if hasWireCounter(s.Store) {
			r.RequestsPerOp = f64(float64(req1-req0) / float64(ops))
			r.Counters["messages_per_op"] = float64(msg1-msg0) / float64(ops)
		}
		switch {
		case !measureServer:
		case srvErr != nil:
			r.Counters["server_cpu_error"] = srvErr.Error()
		default:
			r.ServerCPUUsPerOp = f64(float64(cpuSince(c0, c1)) / float64(time.Microsecond) / float64(ops))
			r.Counters["server_cpu_source"] = srcNote
		}
	}
	return r
}
