// Package zktest starts a private three-server ZooKeeper ensemble on
// loopback for tests: servers that can be killed and started again, and the
// current leader found with the srvr four-letter word.
//
// It needs LEASE_TEST_JAVA and LEASE_TEST_ZK_CLASSPATH (set by
// ./scripts/test); without them the test is skipped, or fails under
// LEASE_TEST_REQUIRE_ALL=1 (see leasetest.Env).
package zktest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease/leasetest"

	"github.com/leasekit/lease/internal/testport"
)

// Ensemble is a private three-server ZooKeeper ensemble.
type Ensemble struct {
	// Servers are the quorum peers, ids 1 to 3.
	Servers []*Server
}

// Server is one quorum peer of an Ensemble.
type Server struct {
	// ID is the server's myid, 1 to 3.
	ID int
	// Addr is its client address, host:port (127.0.0.1 unless Options.Hosts).
	Addr string

	java, cp, cfgPath, logPath string
	wrap                       func(argv []string) []string // Options.Command
	env                        []string                     // Options.Env

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// Start starts three servers on free loopback ports, with their data in
// t.TempDir(), killed at cleanup, and returns them once each one serves as
// leader or follower. tickTime is 500 ms, fsync is off, and the srvr, stat,
// mntr and ruok four-letter words are enabled.
func Start(t testing.TB) *Ensemble {
	t.Helper()
	return StartWith(t, Options{})
}

// Options change where StartWith runs the servers.
type Options struct {
	// Hosts are the servers' addresses (default 127.0.0.1 for each).
	Hosts [3]string
	// Command, if set, wraps server id's command line (e.g. to run it in
	// a network namespace with ip netns exec).
	Command func(id int, argv []string) []string
	// Env, if set, returns variables added to server id's environment
	// (e.g. its own libfaketime clock).
	Env func(id int) []string
}

// StartWith is Start with Options.
func StartWith(t testing.TB, o Options) *Ensemble {
	t.Helper()
	for i, h := range o.Hosts {
		if h == "" {
			o.Hosts[i] = "127.0.0.1"
		}
	}
	java := leasetest.Env(t, "LEASE_TEST_JAVA")
	cp := leasetest.Env(t, "LEASE_TEST_ZK_CLASSPATH")
	ports := FreePorts(t, 9) // client, peer, election port per server
	var members strings.Builder
	for i := range 3 {
		fmt.Fprintf(&members, "server.%d=%s:%d:%d\n", i+1, o.Hosts[i], ports[3+i], ports[6+i])
	}
	dir := t.TempDir()
	e := &Ensemble{}
	for i := range 3 {
		sdir := filepath.Join(dir, fmt.Sprintf("zk%d", i+1))
		data := filepath.Join(sdir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), fmt.Appendf(nil, "%d\n", i+1), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf(`tickTime=500
initLimit=20
syncLimit=10
dataDir=%s
clientPort=%d
clientPortAddress=%s
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=60000
forceSync=no
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
%s`, data, ports[i], o.Hosts[i], members.String())
		s := &Server{ID: i + 1, Addr: fmt.Sprintf("%s:%d", o.Hosts[i], ports[i]), java: java, cp: cp,
			cfgPath: filepath.Join(sdir, "zoo.cfg"), logPath: filepath.Join(sdir, "server.log")}
		if o.Command != nil {
			id := i + 1
			s.wrap = func(argv []string) []string { return o.Command(id, argv) }
		}
		if o.Env != nil {
			s.env = o.Env(i + 1)
		}
		if err := os.WriteFile(s.cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		e.Servers = append(e.Servers, s)
	}
	t.Cleanup(func() {
		for _, s := range e.Servers {
			if err := s.Kill(); err != nil {
				t.Error(err)
			}
		}
	})
	for _, s := range e.Servers {
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := e.WaitServing(ctx); err != nil {
		for _, s := range e.Servers {
			b, _ := os.ReadFile(s.logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("ZooKeeper server %d (%s) log tail:\n%s", s.ID, s.Addr, b)
		}
		t.Fatalf("the ensemble %v: %v", e.Addrs(), err)
	}
	return e
}

// Addrs returns the client addresses of the servers.
func (e *Ensemble) Addrs() []string {
	var a []string
	for _, s := range e.Servers {
		a = append(a, s.Addr)
	}
	return a
}

// WaitServing waits until every server reports itself leader or follower
// and exactly one is the leader.
func (e *Ensemble) WaitServing(ctx context.Context) error {
	var last error
	for {
		leaders := 0
		last = nil
		for _, s := range e.Servers {
			m, err := s.Mode(ctx)
			if err != nil {
				last = err
				break
			}
			switch m {
			case "leader":
				leaders++
			case "follower":
			default:
				last = fmt.Errorf("ZooKeeper server %d (%s) is %q", s.ID, s.Addr, m)
			}
			if last != nil {
				break
			}
		}
		if last == nil && leaders != 1 {
			last = fmt.Errorf("%d leaders", leaders)
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not serving: %w (%w)", last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Leader returns the server that leads now.
func (e *Ensemble) Leader(ctx context.Context) (*Server, error) {
	for _, s := range e.Servers {
		if m, err := s.Mode(ctx); err == nil && m == "leader" {
			return s, nil
		}
	}
	return nil, errors.New("no ZooKeeper server reports itself leader")
}

// Start starts the server's process (again, after Kill).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("ZooKeeper server %d is already running", s.ID)
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	argv := []string{s.java, "-Xms32m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false",
		"-cp", s.cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", s.cfgPath}
	if s.wrap != nil {
		argv = s.wrap(argv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if s.env != nil {
		cmd.Env = append(os.Environ(), s.env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting ZooKeeper server %d: %w", s.ID, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	s.cmd, s.done = cmd, done
	return nil
}

// Kill stops the server at once (SIGKILL) and waits for it to exit. It does
// nothing if the server is not running.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("ZooKeeper server %d (%s) did not exit after SIGKILL", s.ID, s.Addr)
	}
	s.cmd, s.done = nil, nil
	return nil
}

// Mode asks the server with the srvr four-letter word what it is: "leader",
// "follower", or an error if it does not serve.
func (s *Server) Mode(ctx context.Context) (string, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
		if strings.Contains(sc.Text(), "not currently serving") {
			return "", fmt.Errorf("ZooKeeper server %d (%s) is not serving", s.ID, s.Addr)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("ZooKeeper server %d (%s): no Mode in the srvr answer", s.ID, s.Addr)
}

// FreePorts returns n distinct free loopback ports.
func FreePorts(t testing.TB, n int) []int { return testport.Free(t, n) }
