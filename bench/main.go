// Command bench runs leasekit's side-by-side benchmark against the lock
// libraries users would pick instead, in one run, and writes
// BENCHMARKS.md, PNG plots and bench/results.json. From the repository root:
//
//	LEASE_TEST_DURABLE=1 ./scripts/test --no-install --exec bash -c 'cd bench && go run . -private-redis -out ../docs'
//
// (scripts/test starts the servers and runs the command from the root.)
// Servers come from LEASE_TEST_REDIS_ADDR, LEASE_TEST_POSTGRES_DSN,
// LEASE_TEST_ETCD_ENDPOINTS and LEASE_TEST_ZK_SERVERS; a store whose
// variable is unset is skipped with a note, so `cd bench && go run . -out
// ../docs` works too with whatever servers are configured. -quick runs
// every scenario briefly (a few minutes).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leasekit/lease/pglease"
)

// Plan says what to run and for how long.
type Plan struct {
	Scenarios     []string // cycle, contention, read-heavy, acquire-all, failover, heartbeat, pg-contention, many-keys, held-100k
	Systems       []string // system/store keys; empty: all
	CycleDur      time.Duration
	ContDur       time.Duration
	Workers       int
	Hold          time.Duration
	Trials        int
	HBLeases      int
	HBDur         time.Duration
	PGClients     []int
	PGDur         time.Duration
	MKWorkers     int           // many-keys: goroutines of the one process
	MKKeys        int           // many-keys: the key set
	MKDur         time.Duration // many-keys: measured time per system
	HKLeases      int           // held-100k: leases held by the one Client
	HKDur         time.Duration // held-100k: measuring window
	IncludeMemory bool          // smoke tests: the in-memory store
	SleepHold     bool          // contention workers hold with time.Sleep (see holdFor)
}

func fullPlan() Plan {
	return Plan{
		Scenarios: []string{"cycle", "contention", "read-heavy", "acquire-all", "pg-contention", "failover", "heartbeat", "many-keys", "held-100k"},
		CycleDur:  6 * time.Second, ContDur: 12 * time.Second, Workers: 16, Hold: time.Millisecond,
		Trials: 10, HBLeases: 10000, HBDur: 60 * time.Second, PGClients: []int{1, 8}, PGDur: 5 * time.Second,
		MKWorkers: 64, MKKeys: 10000, MKDur: 8 * time.Second, HKLeases: 100000, HKDur: 30 * time.Second,
	}
}

func quickPlan() Plan {
	return Plan{
		Scenarios: []string{"cycle", "contention", "read-heavy", "acquire-all", "pg-contention", "failover", "heartbeat", "many-keys", "held-100k"},
		CycleDur:  1 * time.Second, ContDur: 3 * time.Second, Workers: 16, Hold: time.Millisecond,
		Trials: 3, HBLeases: 1000, HBDur: 10 * time.Second, PGClients: []int{1, 8}, PGDur: 2 * time.Second,
		MKWorkers: 64, MKKeys: 10000, MKDur: 2 * time.Second, HKLeases: 5000, HKDur: 10 * time.Second,
	}
}

// noBatchRenew are the leasekit stores left out of the heartbeat scenario:
// they renew each lease by a request of its own (see its plan below).
var noBatchRenew = map[string]bool{"mysql-table": true, "mysql-getlock": true, "nats": true, "k8s": true}

// heldStores are the stores of the held-100k scenario (issue #26's targets;
// the smoke test adds file and memory).
var heldStores = []string{"redis", "postgres-table", "etcd"}

func main() {
	var (
		out       = flag.String("out", "../docs", "directory for BENCHMARKS.md and bench/*.png")
		jsonOut   = flag.String("json", "results.json", "machine-readable results")
		quick     = flag.Bool("quick", false, "short run (a few minutes) for development")
		only      = flag.String("scenarios", "", "comma-separated scenarios to run (default all)")
		systems   = flag.String("systems", "", "comma-separated system/store keys to run (default all)")
		trials    = flag.Int("trials", 0, "fail-over trials per system (default 10, quick 3)")
		hbLeases  = flag.Int("hb-leases", 0, "leases held in the heartbeat scenario (default 10000, quick 1000)")
		hbWindow  = flag.Duration("hb-window", 0, "heartbeat measuring window (default 1m, quick 10s)")
		mkKeys    = flag.Int("mk-keys", 0, "many-keys: size of the key set (default 10000)")
		mkWorkers = flag.Int("mk-workers", 0, "many-keys: goroutines (default 64)")
		mkDur     = flag.Duration("mk-dur", 0, "many-keys: measured time per system (default 8s, quick 2s)")
		hkLeases  = flag.Int("hk-leases", 0, "held-100k: leases held (default 100000, quick 5000)")
		hkWindow  = flag.Duration("hk-window", 0, "held-100k: measuring window (default 30s, quick 10s)")
		hbScn     = flag.String("hb-scenario", "heartbeat", "internal")
		run       = flag.String("run", "", "run id (internal)")
		envFile   = flag.String("env-file", "", "filelease directory (internal)")
		foChild   = flag.Bool("failover-child", false, "internal: be a fail-over holder")
		hbChild   = flag.Bool("heartbeat-child", false, "internal: be a heartbeat client")
		sysKey    = flag.String("system", "", "internal")
		key       = flag.String("key", "", "internal")
		ttl       = flag.Duration("ttl", 0, "internal")
		store     = flag.String("store", "", "internal")
		hbN       = flag.Int("hb-n", 0, "internal")
		hbDur     = flag.Duration("hb-dur", 0, "internal")
		hbRedis   = flag.String("hb-redis", "", "internal")
		cpuprof   = flag.String("cpuprofile", "", "write a CPU profile of the parent process")
		sleepHold = flag.Bool("sleep-hold", false, "contention workers hold with time.Sleep instead of nanosleep (see holdFor)")
		privRedis = flag.Bool("private-redis", false, "run the Redis systems on a private redis-server and record its CPU and commands per acquisition")
	)
	flag.Parse()
	if *foChild {
		os.Exit(failoverChild(envFromOS(*run, *envFile), *sysKey, *key, *ttl))
	}
	if *hbChild {
		os.Exit(heartbeatChild(envFromOS(*run, *envFile), *hbScn, *store, *hbN, *hbDur, *hbRedis))
	}

	plan := fullPlan()
	if *quick {
		plan = quickPlan()
	}
	plan.SleepHold = *sleepHold
	holdWithSleep = plan.SleepHold
	if *only != "" {
		plan.Scenarios = strings.Split(*only, ",")
	}
	if *systems != "" {
		plan.Systems = strings.Split(*systems, ",")
	}
	if *trials > 0 {
		plan.Trials = *trials
	}
	if *hbLeases > 0 {
		plan.HBLeases = *hbLeases
	}
	if *hbWindow > 0 {
		plan.HBDur = *hbWindow
	}
	for _, o := range []struct {
		dst *int
		v   int
	}{{&plan.MKKeys, *mkKeys}, {&plan.MKWorkers, *mkWorkers}, {&plan.HKLeases, *hkLeases}} {
		if o.v > 0 {
			*o.dst = o.v
		}
	}
	if *mkDur > 0 {
		plan.MKDur = *mkDur
	}
	if *hkWindow > 0 {
		plan.HKDur = *hkWindow
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *cpuprof != "" {
		stopProf, err := startCPUProfile(*cpuprof)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer stopProf()
	}
	dir, err := os.MkdirTemp("", "leasekit-bench-file-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	env := envFromOS(fmt.Sprintf("%x", time.Now().UnixNano()), dir)
	var extraNotes []string
	if *privRedis {
		addr, stopRedis, err := startPrivateRedis(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "private redis-server:", err)
			os.Exit(1)
		}
		defer stopRedis()
		env.RedisAddr, env.StatsRedis = addr, addr
		_ = os.Setenv("LEASE_TEST_REDIS_ADDR", addr) // for the worker processes
		extraNotes = append(extraNotes, "-private-redis: every Redis system ran against a private redis-server on a free loopback port"+
			"; cycle and contention record that server's CPU time, its time in each system's commands and its commands per acquisition (counters in results.json)")
	}
	start := time.Now()
	results, notes := Execute(ctx, env, plan, func(f string, a ...any) {
		fmt.Fprintf(os.Stderr, "%6.1fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(f, a...))
	})
	notes = append(extraNotes, notes...)
	meta := runMeta(start, *quick, plan)
	meta.PrivateRedis = *privRedis
	if err := writeJSON(*jsonOut, results); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := writeReport(*out, results, notes, meta); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "done in %.0fs: %s, %s\n", time.Since(start).Seconds(), *jsonOut, filepath.Join(*out, "BENCHMARKS.md"))
}

// Execute runs plan and returns the results and notes on skipped stores.
func Execute(ctx context.Context, env *Env, plan Plan, logf func(string, ...any)) ([]Result, []string) {
	var notes []string
	var syss, avail []System // selected; every available one (the bases of scenarios 6 and 7)
	skipped := map[string]bool{}
	for _, s := range allSystems() {
		if ok, v := env.available(s.Store); !ok {
			if !skipped[s.Store] {
				notes = append(notes, fmt.Sprintf("store %s skipped: %s is not set", s.Store, v))
				skipped[s.Store] = true
			}
			continue
		}
		avail = append(avail, s)
		if len(plan.Systems) > 0 && !slices.Contains(plan.Systems, s.Key()) {
			continue
		}
		syss = append(syss, s)
	}
	if plan.IncludeMemory {
		mem := leasekitSystem("memory", "memlease (smoke tests only)", 0)
		syss, avail = append(syss, mem), append(avail, mem)
	}
	extPlan := plan
	if plan.IncludeMemory && len(plan.Systems) > 0 {
		extPlan.Systems = append(slices.Clone(plan.Systems), "leasekit/memory")
	}
	rwSyss := selectExt(readHeavySystems(avail), extPlan)
	allSyss := selectExt(acquireAllSystems(avail), extPlan)
	if env.PGDSN != "" && (hasStore(syss, "postgres-table", "postgres-advisory") ||
		hasExtStore(rwSyss, "postgres-table", "postgres-advisory") || hasExtStore(allSyss, "postgres-table", "postgres-advisory")) {
		if err := migratePG(ctx, env.PGDSN, env.PGTable()); err != nil {
			notes = append(notes, "PostgreSQL migrate failed: "+err.Error())
		}
		defer dropPG(env.PGDSN, env.PGTable(), logf)
	}
	var results []Result
	add := func(r Result) {
		logf("%-13s %-18s %-17s %s", r.Scenario, r.System, r.Store, brief(r))
		results = append(results, r)
	}
	has := func(s string) bool { return slices.Contains(plan.Scenarios, s) }
	if has("cycle") {
		rounds := max(int(plan.CycleDur/(500*time.Millisecond)), 1)
		logf("cycle: %d systems interleaved, %d rounds, %v each", len(syss), rounds, plan.CycleDur)
		for _, r := range runCycles(ctx, env, syss, plan.CycleDur, rounds) {
			add(r)
		}
	}
	if has("contention") {
		var cs []System
		for _, s := range syss {
			if s.Wait {
				cs = append(cs, s)
			}
		}
		rounds := max(int(plan.ContDur/(4*time.Second)), 1)
		logf("contention: %d systems interleaved, %d rounds, %v each", len(cs), rounds, plan.ContDur)
		for _, r := range runContentions(ctx, env, cs, "contention", plan.Workers, plan.Hold, plan.ContDur, rounds) {
			add(r)
		}
	}
	if has("read-heavy") {
		rounds := max(int(plan.ContDur/(4*time.Second)), 1)
		logf("read-heavy: %d systems interleaved, %d readers + %d writers, %d rounds, %v each", len(rwSyss), rwReaders, rwWriters, rounds, plan.ContDur)
		for _, r := range runExt(ctx, env, rwSyss, "read-heavy", rwReaders+rwWriters, plan.Hold, plan.ContDur, rounds) {
			add(r)
		}
	}
	if has("acquire-all") {
		rounds := max(int(plan.ContDur/(4*time.Second)), 1)
		logf("acquire-all: %d systems interleaved, %d clients, %d of %d keys, %d rounds, %v each", len(allSyss), plan.Workers, allPick, allKeys, rounds, plan.ContDur)
		for _, r := range runExt(ctx, env, allSyss, "acquire-all", plan.Workers, plan.Hold, plan.ContDur, rounds) {
			add(r)
		}
	}
	if has("pg-contention") {
		for _, s := range syss {
			if s.Name == "leasekit" && strings.HasPrefix(s.Store, "postgres") {
				for _, n := range plan.PGClients {
					add(runContention(ctx, env, s, "pg-contention", n, 0, plan.PGDur))
				}
			}
		}
	}
	if has("failover") {
		// Systems in parallel (each its own keys): the time is TTL-bound.
		var fo []System
		for _, s := range syss {
			if s.Wait && s.Store != "memory" {
				fo = append(fo, s)
			}
		}
		logf("failover: %d systems in parallel, %d trials each, TTL %v", len(fo), plan.Trials, failoverTTL)
		rs := make([]Result, len(fo))
		done := make(chan int)
		for i, s := range fo {
			go func() {
				rs[i] = runFailover(ctx, env, s, plan.Trials)
				done <- i
			}()
		}
		for range fo {
			<-done
		}
		for _, r := range rs {
			add(r)
		}
	}
	if has("heartbeat") {
		var stores []string
		for _, s := range syss {
			// Stores without batched renewal renew each lease by a request
			// of its own: 10,000 leases are 3,000 requests a second, which
			// mysql-table (1,642 a second measured) and nats (1,457, each 4
			// round trips) cannot keep up with; the leases they lose starve
			// the stores measured beside them (etcd lost 8,100 in that
			// run). GET_LOCK mode holds a connection per lease (thousands
			// pass max_connections); k8s renews by an apiserver write.
			if s.Name == "leasekit" && !noBatchRenew[s.Store] {
				stores = append(stores, s.Store)
			}
		}
		logf("heartbeat: %d stores in parallel, %d leases, %v each", len(stores), plan.HBLeases, plan.HBDur)
		for _, r := range runHeartbeats(ctx, env, "heartbeat", stores, plan.HBLeases, plan.HBDur, logf) {
			add(r)
		}
	}
	if has("many-keys") {
		var mk []mkSystem
		for _, s := range manyKeySystems() {
			if ok, _ := env.available(s.Store); ok && (len(plan.Systems) == 0 || slices.Contains(plan.Systems, s.Key())) {
				mk = append(mk, s)
			}
		}
		if plan.IncludeMemory {
			mk = append(mk, mkSystem{Name: "leasekit", Store: "memory", Note: "memlease (smoke tests only)",
				New: func(ctx context.Context, env *Env, w *wire, srv *mkServer) (mkLocker, error) {
					return newMKLeasekit(ctx, env, "memory", w, srv)
				}})
		}
		// The Redis systems run on a redis-server whose CPU is theirs alone:
		// -private-redis's, else one started for the scenario.
		redisAddr, private := env.StatsRedis, env.StatsRedis != ""
		if !private && slices.ContainsFunc(mk, func(s mkSystem) bool { return s.Store == "redis" }) {
			if addr, stop, err := startPrivateRedis(ctx); err == nil {
				defer stop()
				redisAddr, private = addr, true
			} else {
				logf("many-keys: private redis-server: %v; using LEASE_TEST_REDIS_ADDR without server CPU", err)
				redisAddr = env.RedisAddr
			}
		}
		logf("many-keys: %d systems one after the other, %d goroutines, %d keys, %v each", len(mk), plan.MKWorkers, plan.MKKeys, plan.MKDur)
		results = append(results, runManyKeys(ctx, env, mk, plan.MKWorkers, plan.MKKeys, plan.MKDur, redisAddr, private, logf)...)
	}
	if has("held-100k") {
		var stores []string
		for _, s := range syss {
			if s.Name == "leasekit" && (slices.Contains(heldStores, s.Store) || plan.IncludeMemory && (s.Store == "file" || s.Store == "memory")) {
				stores = append(stores, s.Store)
			}
		}
		logf("held-100k: %d stores one after the other, %d leases, %v each", len(stores), plan.HKLeases, plan.HKDur)
		for _, r := range runHeartbeats(ctx, env, "held-100k", stores, plan.HKLeases, plan.HKDur, logf) {
			add(r)
		}
	}
	return results, notes
}

func hasExtStore(ss []extSystem, stores ...string) bool {
	for _, s := range ss {
		if slices.Contains(stores, s.Store) {
			return true
		}
	}
	return false
}

func hasStore(ss []System, stores ...string) bool {
	for _, s := range ss {
		if slices.Contains(stores, s.Store) {
			return true
		}
	}
	return false
}

// migratePG creates the run's lease tables (see Env.PGTable).
func migratePG(ctx context.Context, dsn, table string) error {
	pool, err := newPGPool(ctx, dsn, 2, nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, m := range []pglease.Mode{pglease.ModeTable, pglease.ModeAdvisory} {
		st, err := pglease.New(pool, pglease.WithMode(m), pglease.WithTable(table))
		if err != nil {
			return err
		}
		if err := st.Migrate(ctx); err != nil {
			return err
		}
	}
	return nil
}

// dropPG drops the run's lease tables, bounded in time; a failure is only
// logged.
func dropPG(dsn, table string, logf func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := newPGPool(ctx, dsn, 1, nil)
	if err != nil {
		logf("dropping %s: %v", table, err)
		return
	}
	defer pool.Close()
	q := pgx.Identifier{table + "_queue"}.Sanitize()
	t := pgx.Identifier{table}.Sanitize()
	if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+q+", "+t); err != nil {
		logf("dropping %s: %v", table, err)
	}
}

// brief is a one-line summary for the progress log.
func brief(r Result) string {
	if r.Skipped != "" {
		return "SKIPPED: " + r.Skipped
	}
	var b strings.Builder
	if r.Role != "" {
		b.WriteString(r.Role + ": ")
	}
	if r.OpsPerS > 0 {
		fmt.Fprintf(&b, "%.0f/s ", r.OpsPerS)
	}
	if r.P50Ms != nil {
		fmt.Fprintf(&b, "p50 %.2f p99 %.2f max %.2f ms ", *r.P50Ms, *r.P99Ms, *r.MaxMs)
	}
	if r.HandoffOtherP50Ms != nil {
		fmt.Fprintf(&b, "handoff %.2f ms ", *r.HandoffOtherP50Ms)
	}
	if r.RetakePct != nil {
		fmt.Fprintf(&b, "retake %.0f%% ", *r.RetakePct)
	}
	if r.PerWorkerMin != nil {
		fmt.Fprintf(&b, "per-worker %d..%d ", *r.PerWorkerMin, *r.PerWorkerMax)
	}
	if r.RequestsPerOp != nil {
		fmt.Fprintf(&b, "req/op %.2f ", *r.RequestsPerOp)
	}
	if r.ServerCPUUsPerOp != nil {
		fmt.Fprintf(&b, "server %.1f µs/op ", *r.ServerCPUUsPerOp)
	}
	if r.RoundTripsPerInterval != nil {
		fmt.Fprintf(&b, "rt/interval %.2f ", *r.RoundTripsPerInterval)
	}
	if r.BytesPerLease != nil {
		fmt.Fprintf(&b, "%.0f B/lease ", *r.BytesPerLease)
	}
	if r.CPUPercent != nil {
		fmt.Fprintf(&b, "cpu %.1f%% ", *r.CPUPercent)
	}
	if r.Errors > 0 {
		fmt.Fprintf(&b, "errors %d ", r.Errors)
	}
	if v, ok := r.Counters["client_cpu_us_per_op"].(float64); ok {
		fmt.Fprintf(&b, "client %.1f µs/op ", v)
	}
	for _, c := range []string{"timeouts", "overlaps", "max_readers_together"} {
		if v, ok := r.Counters[c]; ok {
			fmt.Fprintf(&b, "%s %v ", c, v)
		}
	}
	return b.String()
}

func writeJSON(path string, rs []Result) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Meta describes the run for the report.
type Meta struct {
	Date, GoVersion, OS, CPU string
	Commit                   string // the library's git commit, "+dirty" with uncommitted changes
	Cores                    int
	Quick, PrivateRedis      bool
	// EtcdFsync and ZKForceSync say whether the private etcd and ZooKeeper
	// fsync their writes ("yes"/"no", from scripts/test's
	// LEASE_TEST_ETCD_FSYNC and LEASE_TEST_ZK_FORCESYNC; "" when unknown:
	// servers given by their address).
	EtcdFsync, ZKForceSync string
	Duration               time.Duration
	Plan                   Plan
}

func runMeta(start time.Time, quick bool, plan Plan) Meta {
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	commit := "unknown"
	if out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			commit += "+dirty"
		}
	}
	return Meta{Date: start.UTC().Format("2006-01-02 15:04 MST"), GoVersion: runtime.Version(), Commit: commit,
		OS: runtime.GOOS + "/" + runtime.GOARCH, CPU: cpu, Cores: runtime.NumCPU(), Quick: quick,
		Duration: time.Since(start), Plan: plan,
		EtcdFsync: os.Getenv("LEASE_TEST_ETCD_FSYNC"), ZKForceSync: os.Getenv("LEASE_TEST_ZK_FORCESYNC")}
}
