//go:build linux

// Package proctest helps tests that stop real processes with SIGSTOP: a
// holder frozen past its TTL, as a GC pause or a frozen VM would freeze it.
package proctest

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// StopOutsideLock stops process pid with SIGSTOP at a moment it does not hold
// the flock of the lease file at path. A file-store holder takes that lock for
// microseconds per renewal; stopped inside it, it would block every process
// (as filelease documents), which is not the pause these tests mean.
func StopOutsideLock(t testing.TB, pid int, path string) {
	t.Helper()
	for range 100 {
		if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		WaitStopped(t, pid)
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		_ = unix.Close(fd)
		if err == nil {
			return
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			t.Fatal(err)
		}
		if err := unix.Kill(pid, unix.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("process %d held the lease file's lock at every SIGSTOP", pid)
}

// WaitStopped waits until pid is in the stopped state.
func WaitStopped(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// The state follows the command name in parentheses.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && strings.HasPrefix(string(b[i:]), ") T") {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d did not stop", pid)
}
