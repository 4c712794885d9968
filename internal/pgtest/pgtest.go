// Package pgtest starts private PostgreSQL servers for tests that crash,
// restart or reconfigure them: initdb into a temporary directory, one free
// loopback port (trust authentication: only this machine can reach it), run
// as the postgres user when the tests run as root (PostgreSQL refuses root).
// A server is stopped and its directory removed when the test ends, also
// when it fails.
package pgtest

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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/testcert"
	"github.com/leasekit/lease/internal/testport"
)

// Server is one private PostgreSQL server.
type Server struct {
	t      testing.TB
	bin    string
	dir    string
	port   int
	conf   []string // -c settings
	env    []string // extra environment of pg_ctl and so of the server
	asUser []string // runs a command as the postgres user when the test runs as root
}

// BinDir finds the server binaries (initdb, pg_ctl): LEASE_TEST_PG_BIN, or
// else the newest /usr/lib/postgresql/*/bin; "" if there are none.
func BinDir() string {
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

// Start initdbs and starts a server, or fails t. conf are extra settings
// ("name=value"); without any, fsync is off.
func Start(t testing.TB, conf ...string) *Server {
	t.Helper()
	return StartEnv(t, nil, conf...)
}

// StartEnv is Start with extra environment variables ("NAME=value") for
// pg_ctl and so the server, not initdb (for example libfaketime's, see
// internal/faketime).
func StartEnv(t testing.TB, env []string, conf ...string) *Server {
	t.Helper()
	bin := BinDir()
	if bin == "" {
		t.Fatal("no PostgreSQL server binaries: set LEASE_TEST_PG_BIN to the directory of initdb and pg_ctl")
	}
	dir, err := os.MkdirTemp("", "leasekit-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if len(conf) == 0 {
		conf = []string{"fsync=off"}
	}
	s := &Server{t: t, bin: bin, dir: dir, conf: conf, env: env, port: FreePort(t)}
	t.Cleanup(s.destroy)
	if GiveToPostgres(t, dir) {
		s.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	if out, err := s.run(2*time.Minute, "initdb", "-D", s.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// Dir is the server's directory (its data directory is Dir()/data).
func (s *Server) Dir() string { return s.dir }

// Port is the server's loopback port; it stays the same across restarts.
func (s *Server) Port() int { return s.port }

// DSN returns the superuser's DSN.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", s.port)
}

func (s *Server) run(timeout time.Duration, prog string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	argv := append(append(append([]string{}, s.asUser...), filepath.Join(s.bin, prog)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = s.dir
	if len(s.env) > 0 && prog == "pg_ctl" {
		cmd.Env = append(os.Environ(), s.env...)
	}
	return cmd.CombinedOutput()
}

func (s *Server) pgctl(args ...string) ([]byte, error) {
	return s.run(90*time.Second, "pg_ctl", append([]string{"-D", s.data(), "-w", "-t", "60"}, args...)...)
}

// Start starts the server (again), on the same port.
func (s *Server) Start() error {
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s", s.port, s.dir)
	for _, c := range s.conf {
		opts += " -c " + c
	}
	if out, err := s.pgctl("-l", filepath.Join(s.dir, "log"), "-o", opts, "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, s.LogTail())
	}
	return nil
}

// Stop stops the server with pg_ctl's shutdown mode: "immediate" (no
// checkpoint: crash recovery at the next start), "fast" or "smart".
func (s *Server) Stop(mode string) error {
	if out, err := s.pgctl("-m", mode, "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %w\n%s", mode, err, out)
	}
	return nil
}

// LogTail returns the end of the server's log.
func (s *Server) LogTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// destroy stops the server, by SIGKILL of the postmaster if pg_ctl cannot,
// and removes its directory.
func (s *Server) destroy() {
	if _, err := os.Stat(filepath.Join(s.data(), "postmaster.pid")); err == nil {
		if err := s.Stop("immediate"); err != nil {
			s.t.Logf("%v", err)
			if b, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid")); err == nil {
				first, _, _ := strings.Cut(string(b), "\n")
				if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	if err := os.RemoveAll(s.dir); err != nil {
		s.t.Logf("removing %s: %v", s.dir, err)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listened on a
// moment ago.
func FreePort(t testing.TB) int { return testport.One(t) }

// GiveToPostgres makes the postgres user own paths when the test runs as
// root (the server refuses to run as root, so it runs as postgres and must
// read them), and reports whether it did; as another user it does nothing.
func GiveToPostgres(t testing.TB, paths ...string) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root and there is no postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, p := range paths {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return true
}

// TLSFiles writes, in a new directory the postgres user can read, a
// certificate set for clients named "postgres" (with serverIPs in the
// server's certificate) and hba as hba.conf, whose path it returns beside
// the set.
func TLSFiles(t testing.TB, hba string, serverIPs ...net.IP) (*testcert.Set, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgtest-tls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	certs := testcert.New(t, dir, "postgres", serverIPs...)
	hbaFile := filepath.Join(dir, "hba.conf")
	if err := os.WriteFile(hbaFile, []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	paths := []string{dir}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		paths = append(paths, filepath.Join(dir, e.Name()))
	}
	GiveToPostgres(t, paths...)
	return certs, hbaFile
}
