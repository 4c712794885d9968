// Store clock faults: the harness on private servers whose wall clock the
// nemesis steps forward by 1.5×TTL while a lease is held, back by as much,
// and lets drift 20 % fast, through libfaketime (internal/faketime). Run
// them alone with
//
//	./scripts/test --no-install --no-lint --exec go test -race -count=1 -run TestClock -v ./verify/

package verify_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/internal/faketime"
	"github.com/leasekit/lease/internal/pgtest"
	"github.com/leasekit/lease/internal/zktest"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/verify"
)

// clockFaults: the forward step twice per round, as it is the one that
// lets a second holder in.
var clockFaults = []string{verify.FaultClockForward, verify.FaultClockBack, verify.FaultClockDrift, verify.FaultClockForward}

// runClock runs the harness with the store clock faults, stepping the
// store's clock with step (offset reads it), and checks that every kind
// was injected, that nothing unsafe happened, and, with early, that a
// forward step let a second holder in (in a second run if the first had
// none).
// The careless holder whose store clock jumps goes on writing with its
// fence for hold renew intervals (hold/3 TTLs), after the waiters woke and
// took the key.
func runClock(t *testing.T, store string, ttl, least time.Duration, hold int, offset func() time.Duration, step stepFunc, early bool) *verify.Report {
	t.Helper()
	for again := false; ; again = true {
		rep := run(t, verify.Config{Store: store, TTL: ttl, Hold: hold, Duration: max(runDuration(t), least), Faults: clockFaults,
			StepClock: step})
		check(t, rep, verify.FaultClockForward, verify.FaultClockBack, verify.FaultClockDrift)
		t.Logf("store clock offset at the end: %v", offset())
		if !early || rep.EarlyGrants > 0 || t.Failed() {
			return rep
		}
		// Whether a step lets a second holder in while the first still
		// writes is a race between the step reaching the server, the
		// next grant and the end of the hold; on a loaded machine a run
		// of two steps can lose it each time. A second run must not.
		msg := fmt.Sprintf("no forward step of the store's clock let a second holder in (%d steps)", rep.Faults[verify.FaultClockForward])
		if again {
			t.Error(msg + ", in two runs")
			return rep
		}
		t.Log(msg + ": running again")
	}
}

// stepFunc moves a store server's clock (verify.Config.StepClock).
type stepFunc = func(ctx context.Context, d time.Duration) error

// stepNow steps clock for a server that reads the offset at every clock
// call: the step is in effect when Step returns.
func stepNow(clock *faketime.Clock) stepFunc {
	return func(_ context.Context, d time.Duration) error { return clock.Step(d) }
}

// stepSettled steps clock for a server that reads the offset at most once
// a second (faketime.Cached), and waits, for a step of 100 ms or more,
// until the server's clock, read by now, shows it: a step counts as a
// fault only once it is in effect. The drift's steps of a few
// milliseconds reach the server in its own time.
func stepSettled(clock *faketime.Clock, now func(ctx context.Context) (time.Time, error)) stepFunc {
	return func(ctx context.Context, d time.Duration) error {
		old := clock.Offset()
		if err := clock.Step(d); err != nil {
			return err
		}
		if d.Abs() < 100*time.Millisecond {
			return nil
		}
		return waitOffset(ctx, old, d, now)
	}
}

// waitOffset waits up to 10 s until the server's clock, read by now, is
// off by old+d rather than old: read between sent and got, it is past the
// halfway mark old+d/2 whatever the round trip.
func waitOffset(ctx context.Context, old, d time.Duration, now func(ctx context.Context) (time.Time, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		sent := time.Now()
		t, err := now(ctx)
		got := time.Now()
		if err == nil && (d > 0 && t.Sub(got) > old+d/2 || d < 0 && t.Sub(sent) < old+d/2) {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("off by %v", t.Sub(got))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the server's clock did not follow a step of %v from %v: %w (%w)", d, old, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkStep steps the clock by an hour with step and checks that the
// server's clock, read by now, followed, and then whatever ahead checks
// (if not nil), then steps it back.
func checkStep(t *testing.T, step stepFunc, now func(ctx context.Context) (time.Time, error), ahead func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := step(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if off := time.Until(got); off < 59*time.Minute || off > 61*time.Minute {
		t.Fatalf("the server's clock is %v from ours after a step of an hour", off)
	}
	if ahead != nil {
		if err := ahead(); err != nil {
			t.Fatalf("an hour ahead: %v", err)
		}
	}
	if err := step(ctx, -time.Hour); err != nil {
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
	checkStep(t, stepNow(clock), func(ctx context.Context) (time.Time, error) { return c.Time(ctx).Result() }, nil)
	runClock(t, "redis://"+addr+"/0", 500*time.Millisecond, 20*time.Second, 6, clock.Offset, stepNow(clock), true)
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
	done := startProcess(t, cmd, nil)
	if err := waitPing(addr, done, logPath); err != nil {
		t.Fatal(err)
	}
	return addr
}

// startProcess starts cmd, killed at cleanup, and returns a channel closed
// once it has exited, after closing out (its log) if not nil.
func startProcess(t *testing.T, cmd *exec.Cmd, out io.Closer) <-chan struct{} {
	t.Helper()
	if err := cmd.Start(); err != nil {
		if out != nil {
			_ = out.Close()
		}
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		if out != nil {
			_ = out.Close()
		}
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return done
}

// TestClockPostgres: a private PostgreSQL under libfaketime, table mode,
// whose leases expire by the server's clock_timestamp().
func TestClockPostgres(t *testing.T) {
	t.Parallel()
	clock := faketime.New(t)
	p := pgtest.StartEnv(t, clock.Env(), "fsync=off", "max_connections=200")
	checkPGStep(t, clock, p.DSN())
	runClock(t, p.DSN(), 500*time.Millisecond, 20*time.Second, 6, clock.Offset, stepNow(clock), true)
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
	rep := runClock(t, p.DSN()+"&mode=advisory", 500*time.Millisecond, 20*time.Second, 6, clock.Offset, stepNow(clock), false)
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
	checkStep(t, stepNow(clock), func(ctx context.Context) (time.Time, error) {
		var now time.Time
		err := pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now)
		return now, err
	}, nil)
}

// TestClockZooKeeper: a private standalone ZooKeeper under libfaketime.
// zklease judges a lease expired when its node's mtime plus the TTL is
// before the time of the judge's own write, both stamped by the server's
// wall clock, so a forward step expires it. The server times sessions by
// its monotonic clock (System.nanoTime), which a wall clock step leaves
// alone: checked first, a session outlives a step of an hour. The JVM reads
// the offset once a second (faketime.Cached; at every clock call it ran
// too slowly on a busy machine), and each step counts once the server's
// clock shows it.
func TestClockZooKeeper(t *testing.T) {
	t.Parallel()
	clock := faketime.New(t)
	addr := startClockZooKeeper(t, clock.Env(faketime.Cached()))
	probe := dialZK(t, addr, 2*time.Second)
	step := stepSettled(clock, probe.now)
	// An hour is many session timeouts: the server keeps the session.
	checkStep(t, step, probe.now, func() error {
		time.Sleep(2 * probe.timeout)
		return probe.alive()
	})
	// 40 s: the faults take at most 36 s (clockHolder's waits, the
	// drift, the recoveries), 2 s more for the steps to take effect. Hold
	// 15 (5 s): a step takes up to 2 s to reach the server, and the
	// careless holder it is made under has 3 s of its hold left.
	runClock(t, "zk://"+addr+"?session_timeout=4s", time.Second, 40*time.Second, 15, clock.Offset, step, true)
}

// TestClockZooKeeperMonotonic: when the server's monotonic clock jumps too
// (faketime.Monotonic; a paused virtual machine that resumes), ZooKeeper
// can expire every session whose timeout the jump exceeds, and with it the
// session's ephemeral nodes: every zklease lease on that server ends at
// once, and its holder learns it from the expired session. Can, not must:
// the server's expiry thread and the session's next ping race after the
// jump, and a ping that comes first renews the session from the new time
// (a session is touched without a check that it is overdue), so a jump is
// tried up to three times.
func TestClockZooKeeperMonotonic(t *testing.T) {
	t.Parallel()
	clock := faketime.New(t)
	addr := startClockZooKeeper(t, clock.Env(faketime.Cached(), faketime.Monotonic()))
	probe := dialZK(t, addr, 2*time.Second)
	defer probe.close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for try := 1; ; try++ {
		start := time.Now()
		if err := stepSettled(clock, probe.now)(ctx, 5*probe.timeout); err != nil && probe.alive() == nil {
			t.Fatal(err)
		}
		err := probe.waitExpired(10 * time.Second)
		if err == nil {
			t.Logf("the session (timeout %v) expired %v after monotonic jump %d of %v",
				probe.timeout, time.Since(start).Round(time.Millisecond), try, 5*probe.timeout)
			break
		}
		if try == 3 {
			t.Fatalf("after %d monotonic jumps of %v: %v", try, 5*probe.timeout, err)
		}
		t.Logf("monotonic jump %d of %v: %v (a ping came first); jumping again", try, 5*probe.timeout, err)
	}
	// Then the harness, each forward step (1.5×TTL) made four times as
	// long, 6 s on both clocks: past the workers' 4 s sessions, which the
	// server may expire with their nodes, holders' and waiters' alike,
	// while a holder goes on writing with its fence. Safety is required,
	// and that the workers go on acquiring. A witness session of the
	// workers' timeout, opened before each jump, tells (in the log) which
	// jumps ended the sessions: each is the race above.
	var jumps, witnessed atomic.Int32
	jump := func(ctx context.Context, d time.Duration) error {
		w, err := witness(ctx, addr, 4*time.Second, 10*time.Second)
		if err != nil {
			return err
		}
		defer w.close()
		if err := stepSettled(clock, probe.now)(ctx, 4*d); err != nil {
			return err
		}
		jumps.Add(1)
		if err := w.waitExpired(10 * time.Second); err != nil {
			t.Logf("after a monotonic jump of %v: %v", 4*d, err)
			return nil
		}
		witnessed.Add(1)
		return nil
	}
	rep := run(t, verify.Config{Store: "zk://" + addr + "?session_timeout=4s", TTL: time.Second, Hold: 6,
		Duration: max(runDuration(t), 20*time.Second), Faults: []string{verify.FaultClockForward}, StepClock: jump})
	t.Logf("witness sessions expired after %d of %d jumps", witnessed.Load(), jumps.Load())
	check(t, rep, verify.FaultClockForward)
}

// startClockZooKeeper starts a standalone ZooKeeper server with env (its
// clock's), on a free loopback port, killed at cleanup, and returns its
// address once it serves.
func startClockZooKeeper(t *testing.T, env []string) string {
	t.Helper()
	java := leasetest.Env(t, "LEASE_TEST_JAVA")
	cp := leasetest.Env(t, "LEASE_TEST_ZK_CLASSPATH")
	port, dir := freePort(t), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfgPath, logPath := filepath.Join(dir, "zoo.cfg"), filepath.Join(dir, "server.log")
	cfg := fmt.Sprintf(`tickTime=500
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=60000
forceSync=no
admin.enableServer=false
4lw.commands.whitelist=srvr
`, filepath.Join(dir, "data"), port)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(java, "-Xms32m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false",
		"-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", cfgPath)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	done := startProcess(t, cmd, logf)
	srv := &zktest.Server{Addr: addr}
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		mode, err := srv.Mode(ctx)
		cancel()
		if err == nil && mode == "standalone" {
			return addr
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("ZooKeeper on %s exited at start:\n%s", addr, b)
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("ZooKeeper on %s not serving after 90 s (%q, %v):\n%s", addr, mode, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// zkProbe is a session on a private ZooKeeper server that reads the
// server's clock (a write's mtime) and keeps an ephemeral node.
type zkProbe struct {
	conn    *zk.Conn
	events  <-chan zk.Event
	timeout time.Duration // the session's
	clock   string        // node whose mtime is the server's time
	eph     string        // the session's ephemeral node
	expired bool          // the session's expiry was seen
}

// dialZK opens a probe session with timeout on addr (servers separated by
// commas).
func dialZK(t *testing.T, addr string, timeout time.Duration) *zkProbe {
	t.Helper()
	p, err := witness(context.Background(), addr, timeout, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.conn.Close)
	p.clock, p.eph = "/leasekit-clock", "/leasekit-clock-session"
	if _, err := p.conn.Create(p.clock, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := p.conn.Create(p.eph, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	return p
}

// witness opens a session with timeout (within the server's bounds, so
// granted as asked) on addr, comma-separated servers, without a node, and
// returns once it has one, or fails after wait; unlike dialZK it may run
// off the test's goroutine.
func witness(ctx context.Context, addr string, timeout, wait time.Duration) (*zkProbe, error) {
	conn, events, err := zk.Connect(strings.Split(addr, ","), timeout, zk.WithLogInfo(false), zk.WithLogger(zkQuiet{}))
	if err != nil {
		return nil, err
	}
	p := &zkProbe{conn: conn, events: events, timeout: timeout}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for conn.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("no ZooKeeper session on %s (%v): %w", addr, conn.State(), ctx.Err())
		}
	}
	return p, nil
}

// now writes the clock node and returns its mtime.
func (p *zkProbe) now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	st, err := p.conn.Set(p.clock, nil, -1)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(st.Mtime), nil
}

// alive checks that the session has not expired and still has its
// ephemeral node.
func (p *zkProbe) alive() error {
	for {
		select {
		case ev := <-p.events:
			if ev.State == zk.StateExpired {
				p.expired = true
				return errors.New("the session expired")
			}
			continue
		default:
		}
		break
	}
	ok, st, err := p.conn.Exists(p.eph)
	if err != nil {
		return fmt.Errorf("the session's ephemeral node: %w", err)
	}
	if !ok || st.EphemeralOwner != p.conn.SessionID() {
		return errors.New("the session's ephemeral node is gone")
	}
	return nil
}

// waitExpired waits up to d for the server to expire the session.
func (p *zkProbe) waitExpired(d time.Duration) error {
	deadline := time.After(d)
	for !p.expired {
		select {
		case ev := <-p.events:
			p.expired = ev.State == zk.StateExpired
		case <-deadline:
			return fmt.Errorf("the session (timeout %v) did not expire within %v (%v)", p.timeout, d, p.conn.State())
		}
	}
	return nil
}

func (p *zkProbe) close() { p.conn.Close() }

// zkQuiet drops go-zookeeper's log lines (reconnections after expiry).
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// TestClockMariaDB: a private mariadbd under libfaketime, table mode, whose
// leases expire by the server's UTC_TIMESTAMP(6).
func TestClockMariaDB(t *testing.T) {
	t.Parallel()
	clock := faketime.New(t)
	dsn := startClockMariaDB(t, clock)
	// 30 s and Hold 15, not PostgreSQL's 20 s and 6: waiters poll here (no
	// announcements), and on a busy machine as few as one forward step in
	// four let a second holder in before the stepped one stopped writing.
	// So a run may see no early grant by chance: required is safety alone
	// (docs/RELIABILITY.md gives the early grants over several runs).
	rep := runClock(t, "mysql://"+dsn+"?mode=table", 500*time.Millisecond, 30*time.Second, 15, clock.Offset, stepNow(clock), false)
	t.Logf("table mode: %d early grants of %d forward steps", rep.EarlyGrants, rep.Faults[verify.FaultClockForward])
}

// TestClockMariaDBGetLock: the same in GET_LOCK mode, where a lease is a
// connection's named lock, ended with its connection, which the server
// ends after wait_timeout (the TTL, whole seconds) without a renewal: a
// timer, like PostgreSQL's idle_session_timeout, so the steps should let
// nobody in early (the test requires only safety).
func TestClockMariaDBGetLock(t *testing.T) {
	t.Parallel()
	clock := faketime.New(t)
	dsn := startClockMariaDB(t, clock)
	rep := runClock(t, "mysql://"+dsn+"?mode=getlock", time.Second, 35*time.Second, 6, clock.Offset, stepNow(clock), false)
	t.Logf("GET_LOCK mode: %d early grants of %d forward steps", rep.EarlyGrants, rep.Faults[verify.FaultClockForward])
}

// startClockMariaDB starts a private mariadbd on clock (its own data
// directory, made by mariadb-install-db, on a free loopback port and a
// socket in that directory), killed at cleanup, checks that its clock
// follows a step, and returns the user@host:port/db of a fresh database.
// It runs when the other MariaDB/MySQL tests do (LEASE_TEST_MYSQL_DSN).
func startClockMariaDB(t *testing.T, clock *faketime.Clock) string {
	t.Helper()
	leasetest.Env(t, "LEASE_TEST_MYSQL_DSN")
	bins := make([]string, 2)
	for i, name := range []string{"mariadb-install-db", "mariadbd"} {
		p, err := exec.LookPath(name)
		if err != nil {
			p, err = exec.LookPath("/usr/sbin/" + name)
		}
		if err != nil {
			t.Fatalf("%s (Debian package mariadb-server): %v", name, err)
		}
		bins[i] = p
	}
	dir := t.TempDir()
	data, logPath := filepath.Join(dir, "data"), filepath.Join(dir, "log")
	var user []string
	if os.Geteuid() == 0 {
		user = []string{"--user=root"} // mariadbd refuses root without it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, bins[0], append([]string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}, user...)...)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := freePort(t)
	cmd := exec.Command(bins[1], append([]string{"--no-defaults", "--datadir=" + data,
		"--bind-address=127.0.0.1", fmt.Sprintf("--port=%d", port), "--socket=" + filepath.Join(dir, "sock"),
		"--pid-file=" + filepath.Join(dir, "pid"), "--log-error=" + logPath, "--skip-name-resolve",
		"--innodb-flush-log-at-trx-commit=0", "--innodb-buffer-pool-size=32M", "--max-connections=200"}, user...)...)
	cmd.Env = append(os.Environ(), clock.Env()...)
	done := startProcess(t, cmd, nil)
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/?timeout=5s", port))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		err := db.PingContext(pctx)
		pcancel()
		if err == nil {
			break
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("mariadbd on port %d exited at start:\n%s", port, b)
		case <-ctx.Done():
			b, _ := os.ReadFile(logPath)
			t.Fatalf("mariadbd on port %d not ready: %v\n%s", port, err, b)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE leasekit"); err != nil {
		t.Fatal(err)
	}
	checkStep(t, stepNow(clock), func(ctx context.Context) (time.Time, error) {
		var us int64
		err := db.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))").Scan(&us)
		return time.UnixMicro(us), err
	}, nil)
	return fmt.Sprintf("root@127.0.0.1:%d/leasekit", port)
}
