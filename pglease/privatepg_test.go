// A private PostgreSQL server for tests that restart it: initdb into a temp
// dir, a free loopback port, run as the postgres user when the tests run as
// root; stopped and removed when the test ends.

package pglease_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"
)

type privatePG struct {
	t      testing.TB
	conf   []string // -c settings
	bin    string
	dir    string
	port   int
	asUser []string // prefix that runs a command as the postgres user, if needed
}

// pgBinDir finds the server binaries: LEASE_TEST_PG_BIN or the newest
// /usr/lib/postgresql/*/bin.
func pgBinDir() string {
	if d := os.Getenv("LEASE_TEST_PG_BIN"); d != "" {
		return d
	}
	ds, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
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

// startPrivatePG starts a private server or fails the test (it needs the
// same PostgreSQL installation as the shared test server). conf are extra
// settings ("name=value"); without any, fsync is off.
func startPrivatePG(t testing.TB, conf ...string) *privatePG {
	t.Helper()
	sharedDSN(t) // skip like the other tests when no PostgreSQL is configured
	bin := pgBinDir()
	if bin == "" {
		t.Fatal("no PostgreSQL server binaries (set LEASE_TEST_PG_BIN)")
	}
	dir, err := os.MkdirTemp("", "pglease-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if len(conf) == 0 {
		conf = []string{"fsync=off"}
	}
	p := &privatePG{t: t, bin: bin, dir: dir, conf: conf}
	t.Cleanup(func() {
		p.pgctl("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
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
	p.port = freePort(t)
	if out, err := p.run(60*time.Second, filepath.Join(bin, "initdb"), "-D", p.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	p.start()
	return p
}

func (p *privatePG) data() string { return filepath.Join(p.dir, "data") }

// DSN returns the superuser DSN of the private server.
func (p *privatePG) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", p.port)
}

func (p *privatePG) run(timeout time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	argv := append(append(append([]string{}, p.asUser...), name), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = p.dir
	return cmd.CombinedOutput()
}

func (p *privatePG) pgctl(args ...string) ([]byte, error) {
	args = append([]string{"-D", p.data(), "-w", "-t", "60"}, args...)
	return p.run(90*time.Second, filepath.Join(p.bin, "pg_ctl"), args...)
}

func (p *privatePG) start() {
	p.t.Helper()
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s", p.port, p.dir)
	for _, c := range p.conf {
		opts += " -c " + c
	}
	if out, err := p.pgctl("-l", filepath.Join(p.dir, "log"), "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "log"))
		p.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
}

// crash stops the server at once, as a crash would (recovery on start).
func (p *privatePG) crash() {
	p.t.Helper()
	if out, err := p.pgctl("stop", "-m", "immediate"); err != nil {
		p.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
