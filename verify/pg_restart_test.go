// The harness against a private PostgreSQL server that the nemesis restarts
// (pg_ctl stop -m immediate, a crash with recovery, and -m fast, in turn)
// while leases are held. Run it alone with
//
//	./scripts/test -run TestPostgresRestart ./verify/

package verify_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/verify"
)

// privatePG is a throwaway PostgreSQL cluster in a temporary directory,
// listening on one loopback port (trust auth: nothing but this machine can
// reach it) with fsync off, restartable on the same port.
type privatePG struct {
	t      *testing.T
	bin    string
	dir    string
	port   int
	asUser []string // runs a command as the postgres user when the test runs as root

	mu       sync.Mutex
	restarts int
	modes    map[string]int // restarts by shutdown mode
}

// pgServerBin is the directory of initdb, pg_ctl and postgres:
// LEASE_TEST_PG_BIN, or else the newest /usr/lib/postgresql/*/bin.
func pgServerBin() string {
	if d := os.Getenv("LEASE_TEST_PG_BIN"); d != "" {
		return d
	}
	ds, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	sort.Slice(ds, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(ds[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(ds[j]))))
		return vi < vj
	})
	if len(ds) == 0 {
		return ""
	}
	return filepath.Dir(ds[len(ds)-1])
}

// startPrivatePG initdbs and starts a server; it is stopped (immediate) and
// its directory removed at cleanup, also when the test fails.
func startPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	bin := pgServerBin()
	if bin == "" {
		t.Fatal("no PostgreSQL server binaries: set LEASE_TEST_PG_BIN to the directory of initdb and pg_ctl")
	}
	dir, err := os.MkdirTemp("", "leasekit-verify-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p := &privatePG{t: t, bin: bin, dir: dir, port: freePort(t), modes: map[string]int{}}
	t.Cleanup(p.destroy)
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root and there is no postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		p.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	if out, err := p.run(2*time.Minute, "initdb", "-D", p.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *privatePG) data() string { return filepath.Join(p.dir, "data") }

// DSN is the superuser's DSN.
func (p *privatePG) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", p.port)
}

func (p *privatePG) run(timeout time.Duration, prog string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	argv := append(append(append([]string{}, p.asUser...), filepath.Join(p.bin, prog)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = p.dir
	return cmd.CombinedOutput()
}

func (p *privatePG) pgctl(args ...string) ([]byte, error) {
	return p.run(90*time.Second, "pg_ctl", append([]string{"-D", p.data(), "-w", "-t", "60"}, args...)...)
}

func (p *privatePG) start() error {
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c fsync=off -c max_connections=200",
		p.port, p.dir)
	if out, err := p.pgctl("-l", filepath.Join(p.dir, "log"), "-o", opts, "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, p.logTail())
	}
	return nil
}

func (p *privatePG) stop(mode string) error {
	if out, err := p.pgctl("-m", mode, "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %w\n%s", mode, err, out)
	}
	return nil
}

func (p *privatePG) logTail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// restart stops the server — -m immediate (no checkpoint: crash recovery
// at start) and -m fast (clients cut, checkpoint) in turn — keeps it down
// for a second and starts it again on the same port.
func (p *privatePG) restart(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	mode := "immediate"
	if p.restarts%2 == 1 {
		mode = "fast"
	}
	p.restarts++
	p.t.Logf("verify: pg_ctl stop -m %s and start the private PostgreSQL again", mode)
	if err := p.stop(mode); err != nil {
		return err
	}
	p.modes[mode]++
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	return p.start()
}

// destroy stops the server, by SIGKILL of the postmaster if pg_ctl cannot,
// and removes its directory.
func (p *privatePG) destroy() {
	if _, err := os.Stat(filepath.Join(p.data(), "postmaster.pid")); err == nil {
		if err := p.stop("immediate"); err != nil {
			p.t.Logf("%v", err)
			if b, err := os.ReadFile(filepath.Join(p.data(), "postmaster.pid")); err == nil {
				first, _, _ := strings.Cut(string(b), "\n")
				if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	if err := os.RemoveAll(p.dir); err != nil {
		p.t.Logf("removing %s: %v", p.dir, err)
	}
}

// TestPostgresRestart: leases in a private server that is restarted, the
// fenced register on the shared test server. The register stays up while
// the lease store is down, as a resource separate from the lock service
// would: holders that can no longer renew still reach it, which is the case
// fencing must catch. (With the register on the restarted server, it would
// be unreachable exactly while leases are in doubt.)
func TestPostgresRestart(t *testing.T) {
	shared := leasetest.Env(t, "LEASE_TEST_POSTGRES_DSN")
	p := startPrivatePG(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec, cleanup, err := verify.PostgresRegister(ctx, shared, "leasekit_verify_register", "pgrestart-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cleanup(context.Background()) })
	prefix := "verify-test-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	// TTL 1s: a restart keeps the server away for a second or two, longer
	// than TestPostgres's 500ms TTL by itself.
	rep := run(t, verify.Config{Store: p.DSN(), Register: spec, TTL: time.Second, Prefix: prefix,
		Duration: max(runDuration(t), 40*time.Second), Restart: p.restart,
		Faults: []string{verify.FaultRestart, verify.FaultKill, verify.FaultRestart, verify.FaultStop}})
	check(t, rep, verify.FaultRestart, verify.FaultKill, verify.FaultStop)
	p.mu.Lock()
	t.Logf("restarts by shutdown mode: %v", p.modes)
	if p.modes["immediate"] == 0 || p.modes["fast"] == 0 {
		t.Errorf("restarts by mode %v: want both immediate and fast", p.modes)
	}
	p.mu.Unlock()
	// The run cleaned up after itself: no row of its namespace is left.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, p.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	err = pool.QueryRow(ctx, "SELECT count(*) FROM leasekit_leases WHERE ns = $1", prefix).Scan(&n)
	if err != nil || n != 0 {
		t.Errorf("rows left behind in leasekit_leases: %d, %v", n, err)
	}
}
