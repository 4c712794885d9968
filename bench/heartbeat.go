// Scenario 4: heartbeat cost. One Client (in a child process, so that its CPU
// time is its own) holds N leases for a while; we count renewal round trips
// per renew interval on the client's wire and, where the server is private
// to this run, from the server's own counters; the child's CPU time; and the
// memory (heap and goroutine stacks) per held lease.

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
)

// advisoryHBLeases bounds the heartbeat scenario's leases in PostgreSQL
// advisory mode: each session-level advisory lock takes a slot of the
// server's shared lock table (max_locks_per_transaction × max_connections,
// 6,400 with the defaults), which other tests share.
const advisoryHBLeases = 2000

const (
	hbTTL   = 6 * time.Second
	hbRenew = 2 * time.Second // the default TTL/3
)

// heartbeatChild runs in the child process and prints "RESULT <json>".
func heartbeatChild(env *Env, scenario, store string, n int, dur time.Duration, redisAddr string) int {
	r, err := heartbeatMeasure(env, scenario, store, n, dur, redisAddr)
	if err != nil {
		r.Skipped = err.Error()
	}
	b, _ := json.Marshal(r)
	fmt.Printf("RESULT %s\n", b)
	return 0
}

func heartbeatMeasure(env *Env, scenario, store string, n int, dur time.Duration, redisAddr string) (Result, error) {
	r := Result{Scenario: scenario, System: "leasekit", Store: store, Clients: 1,
		TTLMs: ms(hbTTL), IntervalMs: ms(hbRenew), DurationS: dur.Seconds()}
	ctx, cancel := context.WithTimeout(context.Background(), dur+hbSetupTime(n))
	defer cancel()

	w := &wire{}
	var h storeHooks
	var server func(context.Context) (int64, string, error)
	switch store {
	case "redis":
		h.redisHook, h.redisAddr = redisHook{w}, redisAddr
		server = redisServerCount(redisAddr)
	case "postgres-table", "postgres-advisory":
		h.pgTracer = &pgCounter{w}
		if store == "postgres-advisory" {
			h.pgConns = 8 // the store's one session (per TTL) plus pooled statements
		}
		server = pgServerCount(env.PGDSN)
	case "etcd":
		h.etcdDialer = grpcCounting(w)
		server = etcdServerCount(env.Etcd)
	case "zookeeper":
		h.zkDialer = zkDialer(w)
		server = zkServerCount(env.ZK)
	}
	st, cleanup, err := newLeaseStoreWith(ctx, env, store, hbTTL, h)
	if err != nil {
		return r, fmt.Errorf("setup: %w", err)
	}
	defer cleanup()
	defer func() { _ = st.Close() }()
	cst, cnt, err := countStore(st)
	if err != nil {
		return r, err
	}
	var lost, failed atomic.Int64
	obs := lease.ObserverFunc(func(e lease.Event) {
		switch e.Kind {
		case lease.EventLost:
			lost.Add(1)
		case lease.EventRenewFailed:
			failed.Add(1)
		}
	})
	c, err := lease.New(cst, lease.WithTTL(hbTTL), lease.WithRenewInterval(hbRenew), lease.WithObserver(obs))
	if err != nil {
		return r, err
	}
	defer func() {
		done := make(chan struct{})
		go func() { _ = c.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}()

	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	held := make([]*lease.Lease, n)
	var next atomic.Int64
	var acqErr atomic.Value
	var wg sync.WaitGroup
	acqStart := time.Now()
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				l, err := c.TryAcquire(ctx, fmt.Sprintf("hb-%s-%d", store, i))
				if err != nil {
					acqErr.Store(err)
					continue
				}
				held[i] = l
			}
		}()
	}
	wg.Wait()
	acqTime := time.Since(acqStart)
	got := 0
	for _, l := range held {
		if l != nil {
			got++
		}
	}
	r.Leases = got
	if got == 0 {
		return r, fmt.Errorf("no lease acquired: %v", acqErr.Load())
	}
	// The live heap and goroutine stacks after GC, least of six readings
	// over a renew interval: a renewal round's buffers in flight (at
	// 100,000 leases on PostgreSQL a round runs 1.4 s of its 2 s) are not
	// the leases' state, and one reading falls between rounds. The most
	// is kept too. The stacks count: a goroutine per lease would cost at
	// least 2 KiB of stack that HeapAlloc does not show.
	var most uint64
	for i := 0; i < 6; i++ {
		if i > 0 {
			time.Sleep(hbRenew / 5)
		}
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		if i == 0 || liveBytes(&m) < liveBytes(&m1) {
			m1 = m
		}
		most = max(most, liveBytes(&m))
	}
	r.BytesPerLease = f64(float64(int64(liveBytes(&m1))-int64(liveBytes(&m0))) / float64(got))

	// Let renewals converge into one batch per interval, then measure over a
	// whole number of intervals, starting half an interval after a renewal
	// round: the window's edges then fall between rounds, and it counts each
	// round it spans once (a window edge at a round could count it or not,
	// 30 or 31 rounds in 30 intervals). The server's counter is read at both
	// edges alike, in the background at the start: PostgreSQL's reading
	// waits a second for its statistics to be flushed.
	time.Sleep(hbRenew + hbRenew/2)
	round := afterRound(ctx, cnt, 2*hbRenew)
	time.Sleep(time.Until(round.Add(hbRenew / 2)))
	type serverReading struct {
		n    int64
		note string
		err  error
	}
	reading0 := make(chan serverReading, 1)
	lost0 := lost.Load()
	w0, msgs0, renews0, batches0, size0 := w.n.Load(), w.msgs.Load(), cnt.renews.Load(), cnt.batches.Load(), cnt.batchSize.Load()
	pings0, bytes0 := w.pings.Load(), w.bytes.Load()
	rounds0 := cnt.roundCount()
	if server != nil {
		go func() {
			n, note, err := server(ctx)
			reading0 <- serverReading{n, note, err}
		}()
	}
	// LEASEKIT_BENCH_PROFILE_DIR: write a CPU profile of the window.
	stopProf := func() {}
	if d := os.Getenv("LEASEKIT_BENCH_PROFILE_DIR"); d != "" {
		if sp, err := startCPUProfile(filepath.Join(d, "heartbeat-"+store+".pprof")); err == nil {
			stopProf = sp
		}
	}
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	t0 := time.Now()
	time.Sleep(max(dur.Round(hbRenew), hbRenew)) // whole intervals
	el := time.Since(t0)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	stopProf()
	w1, msgs1, renews1, batches1, size1 := w.n.Load(), w.msgs.Load(), cnt.renews.Load(), cnt.batches.Load(), cnt.batchSize.Load()
	pings1, bytes1 := w.pings.Load(), w.bytes.Load()
	// The renewal round latency: each RenewMany call that ended in the
	// window (a round is one call once the leases converged into a batch).
	r.P50Ms, r.P99Ms, r.MaxMs = summary(cnt.roundsSince(rounds0))
	var s0, s1 int64
	var serverNote string
	var serverErr error
	if server != nil {
		s1, _, serverErr = server(ctx)
		r0 := <-reading0
		s0, serverNote = r0.n, r0.note
		serverErr = errors.Join(r0.err, serverErr)
	}
	intervals := float64(el) / float64(hbRenew)
	cpu := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()) + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
	r.CPUPercent = f64(100 * float64(cpu) / float64(el))
	r.DurationS = el.Seconds()
	storeCalls := float64((renews1-renews0)+(batches1-batches0)) / intervals
	counters := map[string]any{
		"acquire_s":                   acqTime.Seconds(),
		"store_calls_per_interval":    storeCalls,
		"renew_calls_per_interval":    float64(renews1-renews0) / intervals,
		"renewmany_per_interval":      float64(batches1-batches0) / intervals,
		"leases_renewed_per_interval": float64((size1-size0)+(renews1-renews0)) / intervals,
		"lost_during_window":          lost.Load() - lost0,
		"lost_total":                  lost.Load(),
		"renew_failures_total":        failed.Load(),
		"heap_inuse_bytes_per_lease":  float64(int64(m1.HeapInuse+m1.StackInuse)-int64(m0.HeapInuse+m0.StackInuse)) / float64(got),
		"most_bytes_per_lease":        float64(int64(most)-int64(liveBytes(&m0))) / float64(got),
		"heap_bytes_before":           m0.HeapAlloc,
		"heap_bytes_after":            m1.HeapAlloc,
		"stack_bytes_before":          m0.StackInuse,
		"stack_bytes_after":           m1.StackInuse,
		"goroutines_after":            runtime.NumGoroutine(),
	}
	switch {
	case store == "file" || store == "memory":
		// No network: a "round trip" is a store call (local system calls).
		r.RoundTripsPerInterval = f64(storeCalls)
		counters["round_trip_source"] = "store calls (no network)"
	case !hasWireCounter(store):
		// No hook into this client's wire: a store call is at least one
		// round trip, so the figure is a lower bound.
		r.RoundTripsPerInterval = f64(storeCalls)
		counters["round_trip_source"] = "store calls (no wire counter for this client: at least one round trip each)"
	default:
		r.RoundTripsPerInterval = f64(float64(w1-w0) / intervals)
		counters["wire_messages_per_interval"] = float64(msgs1-msgs0) / intervals
		if store == "zookeeper" {
			// The wire's writes by kind: the library's pings apart.
			counters["zk_pings_per_interval"] = float64(pings1-pings0) / intervals
			counters["zk_requests_per_interval"] = float64((w1-w0)-(pings1-pings0)) / intervals
			counters["zk_bytes_per_lease_renewed"] = float64(bytes1-bytes0) / float64(max((size1-size0)+(renews1-renews0), 1))
		}
		counters["round_trip_source"] = "client wire round trips, a pipeline once (go-redis hook / pgx tracer / gRPC interceptors / ZooKeeper writes)"
	}
	if server != nil {
		if serverErr != nil {
			counters["server_error"] = serverErr.Error()
		} else {
			counters["server_requests_per_interval"] = float64(s1-s0) / intervals
			counters["server_counter"] = serverNote
		}
	}
	if store == "postgres-advisory" {
		if mc, err := pgMaxConnections(ctx, env.PGDSN); err == nil {
			counters["max_connections"] = mc
		}
	}
	if e := acqErr.Load(); e != nil {
		counters["acquire_error"] = fmt.Sprint(e)
	}
	r.Counters = counters
	return r, nil
}

// ---------------------------------------------------------------- server counters

// redisServerCount reads the private server's commandstats: calls of
// EVALSHA+EVAL (one per lease renewed) — Redis counts commands, not pipelines.
func redisServerCount(addr string) func(context.Context) (int64, string, error) {
	return func(ctx context.Context) (int64, string, error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		s, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			return 0, "", err
		}
		var n int64
		for _, line := range strings.Split(s, "\n") {
			for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
				if strings.HasPrefix(line, cmd) {
					f := strings.SplitN(strings.TrimPrefix(line, cmd), ",", 2)[0]
					v, _ := strconv.ParseInt(strings.TrimPrefix(f, "calls="), 10, 64)
					n += v
				}
			}
		}
		return n, "private redis-server INFO commandstats: EVALSHA+EVAL calls (commands, not round trips)", nil
	}
}

// pgServerCount reads xact_commit of the database (shared with other
// clients of the same database: an upper bound).
func pgServerCount(dsn string) func(context.Context) (int64, string, error) {
	return func(ctx context.Context) (int64, string, error) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return 0, "", errors.New("connect for pg_stat_database failed")
		}
		defer conn.Close(context.WithoutCancel(ctx))
		// Statistics are flushed at most once a second: force it.
		_, _ = conn.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		time.Sleep(1100 * time.Millisecond)
		var n int64
		err = conn.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n)
		return n, "pg_stat_database.xact_commit of the shared test database (includes other clients' transactions)", err
	}
}

func pgMaxConnections(ctx context.Context, dsn string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", errors.New("connect failed")
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var s string
	err = conn.QueryRow(ctx, "SHOW max_connections").Scan(&s)
	return s, err
}

// etcdServerCount sums grpc_server_msg_received_total from /metrics.
func etcdServerCount(eps []string) func(context.Context) (int64, string, error) {
	return func(ctx context.Context) (int64, string, error) {
		var total int64
		for _, ep := range eps {
			if !strings.Contains(ep, "://") {
				ep = "http://" + ep
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ep+"/metrics", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, "", err
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "grpc_server_msg_received_total{") {
					f := strings.Fields(line)
					v, _ := strconv.ParseFloat(f[len(f)-1], 64)
					total += int64(v)
				}
			}
			resp.Body.Close()
		}
		return total, "etcd /metrics grpc_server_msg_received_total (all clients of this run's private etcd)", nil
	}
}

// zkServerCount reads zk_packets_received from mntr.
func zkServerCount(servers []string) func(context.Context) (int64, string, error) {
	return func(ctx context.Context) (int64, string, error) {
		var total int64
		for _, s := range servers {
			c, err := net.DialTimeout("tcp", s, 5*time.Second)
			if err != nil {
				return 0, "", err
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write([]byte("mntr"))
			b, _ := io.ReadAll(c)
			c.Close()
			found := false
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "zk_packets_received" {
					v, _ := strconv.ParseInt(f[1], 10, 64)
					total += v
					found = true
				}
			}
			if !found {
				return 0, "", fmt.Errorf("mntr: no zk_packets_received (4lw whitelist?)")
			}
		}
		return total, "ZooKeeper mntr zk_packets_received (pings included; all clients of this run's private server)", nil
	}
}

// ---------------------------------------------------------------- parent side

// runHeartbeats runs one child per store, in parallel (held-100k: one
// after the other), and collects results.
func runHeartbeats(ctx context.Context, env *Env, scenario string, stores []string, n int, dur time.Duration, logf func(string, ...any)) []Result {
	var redisAddr string
	var stopRedis func()
	for _, s := range stores {
		if s == "redis" {
			addr, stop, err := startPrivateRedis(ctx)
			if err != nil {
				logf("heartbeat: private redis-server: %v", err)
			} else {
				redisAddr, stopRedis = addr, stop
			}
		}
	}
	if stopRedis != nil {
		defer stopRedis()
	}
	results := make([]Result, len(stores))
	var wg sync.WaitGroup
	for i, store := range stores {
		wg.Add(1)
		run := func(f func()) { go f() }
		if scenario == "held-100k" {
			// One store after the other: 100,000 acquisitions on one store
			// load this machine enough to make another's renewals late.
			run = func(f func()) { f() }
		}
		run(func() {
			defer wg.Done()
			nn := n
			if store == "postgres-advisory" {
				nn = min(n, advisoryHBLeases) // each lock takes a slot of the server's lock table
			}
			if store == "redis" && redisAddr == "" {
				results[i] = Result{Scenario: scenario, System: "leasekit", Store: store, Clients: 1, Skipped: "no private redis-server"}
				return
			}
			results[i] = heartbeatParent(ctx, env, scenario, store, nn, dur, redisAddr)
		})
	}
	wg.Wait()
	return results
}

func heartbeatParent(ctx context.Context, env *Env, scenario, store string, n int, dur time.Duration, redisAddr string) Result {
	fail := func(err error) Result {
		return Result{Scenario: scenario, System: "leasekit", Store: store, Clients: 1, Skipped: err.Error()}
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	cctx, cancel := context.WithTimeout(ctx, dur+hbSetupTime(n)+time.Minute)
	defer cancel()
	args := append([]string{"-heartbeat-child", "-hb-scenario=" + scenario, "-store=" + store, "-hb-n=" + strconv.Itoa(n), "-hb-dur=" + dur.String(), "-hb-redis=" + redisAddr}, env.childArgs()...)
	cmd := exec.CommandContext(cctx, exe, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fail(fmt.Errorf("child: %w", err))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if j, ok := strings.CutPrefix(line, "RESULT "); ok {
			var r Result
			if err := json.Unmarshal([]byte(j), &r); err != nil {
				return fail(err)
			}
			return r
		}
	}
	return fail(errors.New("child printed no result"))
}

// startPrivateRedis starts redis-server on a free loopback port, without
// persistence, in a temporary directory; stop kills it and removes the dir.
func startPrivateRedis(ctx context.Context) (string, func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "leasekit-bench-redis-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for i := 0; i < 100; i++ {
		if rdb.Ping(ctx).Err() == nil {
			return addr, stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, errors.New("private redis-server did not answer PING in 5s")
}

// hbSetupTime bounds a heartbeat child's work besides its window:
// acquiring n leases (the slowest store takes about 2 ms each, 32 at a
// time), converging and closing.
func hbSetupTime(n int) time.Duration { return 4*time.Minute + time.Duration(n)*2*time.Millisecond }

// liveBytes is the memory a held lease can cost: the live heap plus the
// goroutine stacks.
func liveBytes(m *runtime.MemStats) uint64 { return m.HeapAlloc + m.StackInuse }

// afterRound waits until cnt sees the client's next renewal call (Renew or
// RenewMany), for at most limit, and returns when it saw it (or gave up).
func afterRound(ctx context.Context, cnt *countingStore, limit time.Duration) time.Time {
	calls := func() int64 { return cnt.renews.Load() + cnt.batches.Load() }
	c0 := calls()
	for end := time.Now().Add(limit); time.Now().Before(end) && ctx.Err() == nil; {
		if calls() != c0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Now()
}
