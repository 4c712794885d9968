// Store clock faults: the harness on private servers whose wall clock the
// nemesis steps forward by 1.5×TTL while a lease is held, back by as much,
// and lets drift 20 % fast, through libfaketime (internal/faketime). Run
// them alone with
//
//	./scripts/test --no-install --no-lint --exec go test -race -count=1 -run TestClock -v ./verify/

package verify_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/internal/faketime"
	"github.com/leasekit/lease/internal/pgtest"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/verify"
)

// clockFaults: the forward step twice per round, as it is the one that
// lets a second holder in.
var clockFaults = []string{verify.FaultClockForward, verify.FaultClockBack, verify.FaultClockDrift, verify.FaultClockForward}

// runClock runs the harness with the store clock faults on clock and checks
// that every kind was injected, that nothing unsafe happened, and, with
// early, that a forward step let a second holder in.
func runClock(t *testing.T, store string, ttl, least time.Duration, clock *faketime.Clock, early bool) *verify.Report {
	t.Helper()
	// Hold 6: the careless holder whose store clock jumps goes on writing
	// with its fence for 2 TTLs, after the waiters woke and took the key.
	rep := run(t, verify.Config{Store: store, TTL: ttl, Hold: 6, Duration: max(runDuration(t), least), Faults: clockFaults,
		StepClock: func(_ context.Context, d time.Duration) error { return clock.Step(d) }})
	check(t, rep, verify.FaultClockForward, verify.FaultClockBack, verify.FaultClockDrift)
	if early && rep.EarlyGrants == 0 {
		t.Errorf("no forward step of the store's clock let a second holder in (%d steps)", rep.Faults[verify.FaultClockForward])
	}
	t.Logf("store clock offset at the end: %v", clock.Offset())
	return rep
}

// checkStep steps clock by an hour and checks that the server's clock,
// read by now, followed, then steps it back.
func checkStep(t *testing.T, clock *faketime.Clock, now func(ctx context.Context) (time.Time, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.Step(time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if off := time.Until(got); off < 59*time.Minute || off > 61*time.Minute {
		t.Fatalf("the server's clock is %v from ours after a step of an hour", off)
	}
	if err := clock.Step(-time.Hour); err != nil {
		t.Fatal(err)
	}
}

// TestClockRedis: a private redis-server (no persistence) under libfaketime,
// on glibc's allocator (Debian's build links jemalloc, which hangs under
// libfaketime at start). Redis expires keys by its wall clock (mstime), so
// the forward step expires the held lease at once.
func TestClockRedis(t *testing.T) {
	t.Parallel()
	leasetest.Env(t, "LEASE_TEST_REDIS_ADDR") // skip like the other Redis tests when Redis is not set up
	clock := faketime.New(t)
	addr := startClockRedis(t, clock)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	checkStep(t, clock, func(ctx context.Context) (time.Time, error) { return c.Time(ctx).Result() })
	runClock(t, "redis://"+addr+"/0", 500*time.Millisecond, 20*time.Second, clock, true)
}

// startClockRedis starts redis-server on clock, on a free loopback port,
// killed at cleanup, and returns its address.
func startClockRedis(t *testing.T, clock *faketime.Clock) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	port, dir := freePort(t), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(dir, "log")
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--logfile", logPath)
	cmd.Env = append(os.Environ(), clock.EnvLibcMalloc(t)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	if err := waitPing(addr, done, logPath); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestClockPostgres: a private PostgreSQL under libfaketime, table mode,
// whose leases expire by the server's clock_timestamp().
func TestClockPostgres(t *testing.T) {
	t.Parallel()
	clock := faketime.New(t)
	p := pgtest.StartEnv(t, clock.Env(), "fsync=off", "max_connections=200")
	checkPGStep(t, clock, p.DSN())
	runClock(t, p.DSN(), 500*time.Millisecond, 20*time.Second, clock, true)
}

// TestClockPostgresAdvisory: the same in advisory mode. A lease is a
// session's advisory lock and ends with its session, which the server ends
// after idle_session_timeout (the TTL) without a renewal: a timer, not a
// comparison of timestamps, so the steps should let nobody in early (the
// test requires no early grant, only safety).
func TestClockPostgresAdvisory(t *testing.T) {
	t.Parallel()
	clock := faketime.New(t)
	p := pgtest.StartEnv(t, clock.Env(), "fsync=off", "max_connections=200")
	checkPGStep(t, clock, p.DSN())
	rep := runClock(t, p.DSN()+"&mode=advisory", 500*time.Millisecond, 20*time.Second, clock, false)
	t.Logf("advisory mode: %d early grants of %d forward steps", rep.EarlyGrants, rep.Faults[verify.FaultClockForward])
}

func checkPGStep(t *testing.T, clock *faketime.Clock, dsn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	checkStep(t, clock, func(ctx context.Context) (time.Time, error) {
		var now time.Time
		err := pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now)
		return now, err
	})
}
