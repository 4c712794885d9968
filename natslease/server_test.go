// Private nats-server processes for tests: JetStream on a free loopback
// port, the store in t.TempDir(), killed at cleanup.

package natslease_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/testport"
	"github.com/leasekit/lease/leasetest"
)

// server is a private nats-server.
type server struct {
	t      testing.TB
	url    string
	args   []string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startServer starts nats-server -js with the extra flags given and waits
// until it answers.
func startServer(t testing.TB, extra ...string) *server {
	t.Helper()
	bin := os.Getenv("LEASE_TEST_NATS_BIN")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nats-server"); err != nil {
			leasetest.Env(t, "LEASE_TEST_NATS_BIN") // skips, or fails in CI
		}
	}
	dir, port := t.TempDir(), testport.Free(t, 1)[0]
	s := &server{t: t, url: fmt.Sprintf("nats://127.0.0.1:%d", port), log: filepath.Join(dir, "nats.log"),
		args: append([]string{bin, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", filepath.Join(dir, "js")}, extra...)}
	t.Cleanup(s.kill)
	s.start()
	return s
}

// start starts the process (again, after kill: it keeps its store) and
// waits until its INFO says JetStream is on.
func (s *server) start() {
	s.t.Helper()
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting nats-server: %v", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.exited)
	for deadline := time.Now().Add(30 * time.Second); !s.ready(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.log)
			s.t.Fatalf("nats-server on %s not ready within 30s; log:\n%s", s.url, b)
		}
	}
}

// ready reports whether the server's INFO line says JetStream is on.
func (s *server) ready() bool {
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.url, "nats://"), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.Contains(line, `"jetstream":true`)
}

// kill stops the process with SIGKILL and waits for it to exit.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.t.Errorf("nats-server did not exit within 10s of SIGKILL")
	}
	s.cmd = nil
}
