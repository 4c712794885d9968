// CI-sized runs of the harness on every store the test servers provide, and
// the control run without fencing.

package verify_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/verify"
)

func TestMain(m *testing.M) {
	verify.MaybeWorker() // the harness re-executes this test binary as its workers
	os.Exit(m.Run())
}

// runDuration is each store's run: LEASE_VERIFY_DURATION (e.g. 10m for the
// long run of docs/RELIABILITY.md), default 15s.
func runDuration(t *testing.T) time.Duration {
	if s := os.Getenv("LEASE_VERIFY_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("LEASE_VERIFY_DURATION: %v", err)
		}
		return d
	}
	return 15 * time.Second
}

func run(t *testing.T, cfg verify.Config) *verify.Report {
	t.Helper()
	if cfg.Duration == 0 {
		cfg.Duration = runDuration(t)
	}
	if cfg.Hold == 0 {
		cfg.Hold = 3
	}
	// Kept when the test fails: the porcupine visualization of a failing
	// history is there.
	dir, err := os.MkdirTemp("", "leasekit-verify-"+strings.ReplaceAll(t.Name(), "/", "_")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept %s for inspection", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	cfg.Dir = dir
	cfg.Log = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+3*time.Minute)
	defer cancel()
	rep, err := verify.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("verify.Run: %v", err)
	}
	t.Logf("report:\n%s", rep)
	if os.Getenv("LEASE_VERIFY_REPORT") != "" {
		f, err := os.OpenFile(os.Getenv("LEASE_VERIFY_REPORT"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "## %s\n\n```\n%s```\n\n", t.Name(), rep)
			f.Close()
		}
	}
	return rep
}

// check asserts the safety properties and that the run did something.
func check(t *testing.T, rep *verify.Report, faults ...string) {
	t.Helper()
	if !rep.OK() {
		t.Errorf("violations: %v", rep.Violations)
	}
	if rep.StaleAccepted != 0 || rep.FenceRegressions != 0 || rep.StuckLeases != 0 || !rep.Linearizable {
		t.Errorf("stale accepted %d, fence regressions %d, stuck %d, linearizable %v; want 0, 0, 0, true",
			rep.StaleAccepted, rep.FenceRegressions, rep.StuckLeases, rep.Linearizable)
	}
	if rep.Acquisitions < 10 || rep.Operations < 10 {
		t.Errorf("only %d acquisitions and %d operations: the run did too little to prove anything; workers said:\n%s",
			rep.Acquisitions, rep.Operations, strings.Join(rep.WorkerErrors, "\n"))
	}
	for _, f := range faults {
		if rep.Faults[f] == 0 {
			t.Errorf("no %q fault was injected", f)
		}
	}
}

func TestFileStore(t *testing.T) {
	t.Parallel()
	rep := run(t, verify.Config{Store: "file://" + filepath.Join(t.TempDir(), "leases"), TTL: 500 * time.Millisecond})
	check(t, rep, verify.FaultKill, verify.FaultStop)
	if rep.StaleRejected == 0 {
		t.Errorf("no stale operation was rejected: the pauses of careless holders should have produced some")
	}
}

// TestWithoutFencing is the control: the same workload and pauses against a
// register that ignores fences. Stale writes then land, and the checker
// must notice; the fenced runs above are only meaningful because it does.
func TestWithoutFencing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rep := run(t, verify.Config{Store: "file://" + filepath.Join(dir, "leases"), TTL: 300 * time.Millisecond,
		Register: "unfenced:" + filepath.Join(dir, "register"), Faults: []string{verify.FaultStop}})
	if rep.StaleAccepted == 0 || rep.Linearizable || rep.OK() {
		t.Fatalf("without fencing: stale accepted %d, linearizable %v, violations %v; want stale writes accepted and caught",
			rep.StaleAccepted, rep.Linearizable, rep.Violations)
	}
	if rep.UnfencedLetThrough == 0 || rep.OverlappingHolders == 0 {
		t.Errorf("let through %d, overlapping holders %d; want both > 0", rep.UnfencedLetThrough, rep.OverlappingHolders)
	}
	if rep.Visualization == "" {
		t.Error("no porcupine visualization was written for the failing history")
	} else if b, err := os.ReadFile(rep.Visualization); err != nil || !strings.Contains(string(b), "<html") {
		t.Errorf("visualization %s: %v", rep.Visualization, err)
	}
}

func TestRedisPrivateServer(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	prefix := "verify-test-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	rep := run(t, verify.Config{Store: srv.url(), TTL: 500 * time.Millisecond, Restart: srv.restart, Prefix: prefix})
	check(t, rep, verify.FaultKill, verify.FaultStop, verify.FaultCut, verify.FaultLatency, verify.FaultRestart)
	// The run cleaned up after itself: no key of its prefix is left.
	c := redis.NewClient(&redis.Options{Addr: srv.addr()})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if keys, err := c.Keys(ctx, "*"+prefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("keys left behind: %v, %v", keys, err)
	}
}

func TestPostgres(t *testing.T) { t.Parallel(); runPostgres(t, "") }

// TestPostgresAdvisory: the same faults on advisory mode, where a worker's
// lease is an advisory lock on its store's shared session: a SIGSTOPped or
// cut-off holder's session ends after the TTL (idle_session_timeout), a
// killed one's at once.
func TestPostgresAdvisory(t *testing.T) { t.Parallel(); runPostgres(t, "advisory") }

// runPostgres runs the harness on the shared PostgreSQL server in mode (""
// for table mode) and checks that the run left no row behind.
func runPostgres(t *testing.T, mode string) {
	store, spec := postgresURL(t, mode), postgresRegister(t, "pg-"+mode)
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	prefix := "verify-test-" + mode + id + "-"
	rep := run(t, verify.Config{Store: store, Register: spec, TTL: 500 * time.Millisecond, Prefix: prefix})
	check(t, rep, verify.FaultKill, verify.FaultStop, verify.FaultCut)
	// The run cleaned up after itself: no row of its namespace is left.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, postgresURL(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM leasekit_leases WHERE ns = $1", prefix).Scan(&n); err != nil || n != 0 {
		t.Errorf("rows left behind in leasekit_leases: %d, %v", n, err)
	}
}

// TestMySQL: the faults on MariaDB/MySQL's table mode (LEASE_TEST_MYSQL_DSN).
func TestMySQL(t *testing.T) {
	t.Parallel()
	rep := run(t, verify.Config{Store: mysqlURL(t, "table"), TTL: 500 * time.Millisecond})
	check(t, rep, verify.FaultKill, verify.FaultStop, verify.FaultCut)
}

// TestMySQLGetLock: the same faults on GET_LOCK mode, where a worker's lease
// is a lock of a connection of its own: a killed or cut-off holder's
// connection ends at once, a SIGSTOPped one's after wait_timeout (the TTL,
// whole seconds).
func TestMySQLGetLock(t *testing.T) {
	t.Parallel()
	rep := run(t, verify.Config{Store: mysqlURL(t, "getlock"), TTL: time.Second,
		Faults: []string{verify.FaultKill, verify.FaultStop, verify.FaultCut}}) // three in 15s at this TTL
	check(t, rep, verify.FaultKill, verify.FaultStop, verify.FaultCut)
}

func TestEtcd(t *testing.T) {
	t.Parallel()
	rep := run(t, verify.Config{Store: etcdURL(t), TTL: 2 * time.Second,
		Duration: max(runDuration(t), 25*time.Second)})
	check(t, rep, verify.FaultKill, verify.FaultStop)
}

func TestNATS(t *testing.T) {
	t.Parallel()
	rep := run(t, verify.Config{Store: natsURL(t), TTL: 500 * time.Millisecond})
	check(t, rep, verify.FaultKill, verify.FaultStop, verify.FaultCut)
}

// TestK8s: the harness on the kube-apiserver of LEASE_TEST_K8S_KUBECONFIG
// (kill and stop: the proxy cannot stand in for a kubeconfig's server).
func TestK8s(t *testing.T) {
	t.Parallel()
	rep := run(t, verify.Config{Store: k8sURL(t), TTL: time.Second,
		Faults: []string{verify.FaultKill, verify.FaultStop}})
	check(t, rep, verify.FaultKill, verify.FaultStop)
}

func TestZooKeeper(t *testing.T) {
	t.Parallel()
	rep := run(t, verify.Config{Store: zkURL(t), TTL: time.Second})
	check(t, rep, verify.FaultKill, verify.FaultStop)
}
