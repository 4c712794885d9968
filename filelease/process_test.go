//go:build linux

// Holders that die, stop or outlive a reboot. The test binary re-executes
// itself as a helper process (TestMain) that holds a key, then is killed
// (SIGKILL) or frozen (SIGSTOP).

package filelease_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/internal/proctest"
)

// helperEnv holds "dir key ttl" in a helper process.
const helperEnv = "FILELEASE_TEST_HOLD"

func TestMain(m *testing.M) {
	if args := strings.Fields(os.Getenv(helperEnv)); len(args) == 3 {
		if err := hold(args[0], args[1], args[2]); err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hold is a helper process: it takes key in dir, says "acquired FENCE", and
// when its lease is lost says "lost ERR", then how a renewal with the lost
// lease's token went ("renew refused true" for ErrNotHeld).
func hold(dir, key, ttlText string) error {
	ttl, err := time.ParseDuration(ttlText)
	if err != nil {
		return err
	}
	store, err := filelease.New(dir)
	if err != nil {
		return err
	}
	c, err := lease.New(store, lease.WithTTL(ttl), lease.WithHolder(fmt.Sprintf("helper-%d", os.Getpid())))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()
	l, err := c.TryAcquire(ctx, key)
	if err != nil {
		return err
	}
	fmt.Printf("acquired %d\n", l.Fence())
	<-l.Done()
	fmt.Printf("lost %v\n", l.Err())
	err = store.Renew(ctx, driver.Request{Key: key, Token: l.Token(), TTL: ttl})
	fmt.Printf("renew refused %v: %v\n", errors.Is(err, lease.ErrNotHeld), err)
	return nil
}

// helper is a running helper process and its output lines.
type helper struct {
	cmd   *exec.Cmd
	lines chan string
}

// startHelper starts a helper holding key in dir, killed when the test ends,
// and waits until it holds the key; it returns the helper and its fence.
func startHelper(t *testing.T, dir, key string, ttl time.Duration) (*helper, uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir+" "+key+" "+ttl.String(), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a helper process: %v", err)
	}
	h := &helper{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		for sc := bufio.NewScanner(stdout); sc.Scan(); {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	f, ok := strings.CutPrefix(h.line(t, 60*time.Second), "acquired ")
	fence, err := strconv.ParseUint(f, 10, 64)
	if !ok || err != nil {
		t.Fatalf("helper said %q, want acquired and a fence", f)
	}
	time.Sleep(ttl / 2) // a renewal or so
	return h, fence
}

// line returns the helper's next output line, failing the test after d.
func (h *helper) line(t *testing.T, d time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			t.Fatalf("helper %d exited without more output", h.cmd.Process.Pid)
		}
		return l
	case <-time.After(d):
		t.Fatalf("no output from helper %d within %v", h.cmd.Process.Pid, d)
	}
	return ""
}

// acquireAfter acquires key through a new Client over s, and checks that this
// took about the helper's TTL since it stopped, and that the fence is larger.
func acquireAfter(t *testing.T, s *filelease.Store, key string, ttl time.Duration, since time.Time, fence uint64) *lease.Lease {
	t.Helper()
	c, err := lease.New(s, lease.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l, err := c.Acquire(testCtx(t, 30*time.Second), key)
	if err != nil {
		t.Fatalf("Acquire after the holder stopped: %v", err)
	}
	took := time.Since(since)
	t.Logf("acquired %v after the holder stopped (TTL %v)", took.Round(time.Millisecond), ttl)
	// The holder renewed at most TTL/3 before it stopped: its lease outlives
	// it by at least 2/3 of the TTL.
	if took < ttl/2 || took > ttl+10*time.Second {
		t.Errorf("acquired %v after the holder stopped, want after about the TTL %v", took, ttl)
	}
	if l.Fence() <= fence {
		t.Errorf("fence after the stopped holder %d, want > %d", l.Fence(), fence)
	}
	return l
}

// TestKilledHolderExpires: a holder killed with SIGKILL loses its lease after
// its TTL; a waiter in another process then acquires it with a larger fence.
func TestKilledHolderExpires(t *testing.T) {
	s := newStore(t, "")
	key := "killed-" + randHex(4)
	const ttl = time.Second
	h, fence := startHelper(t, s.Dir(), key, ttl)
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = h.cmd.Wait()
	acquireAfter(t, s, key, ttl, killed, fence)
}

// TestStoppedHolderLoses: a holder frozen with SIGSTOP past its TTL loses the
// lease to another process; once resumed, it reports the lease lost and its
// renewal is refused with ErrNotHeld, and the new holder is intact.
func TestStoppedHolderLoses(t *testing.T) {
	s := newStore(t, "")
	key := "stopped-" + randHex(4)
	const ttl = time.Second
	h, fence := startHelper(t, s.Dir(), key, ttl)
	proctest.StopOutsideLock(t, h.cmd.Process.Pid, s.File(key))
	l := acquireAfter(t, s, key, ttl, time.Now(), fence)
	if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if line := h.line(t, 20*time.Second); !strings.HasPrefix(line, "lost ") {
		t.Fatalf("resumed holder said %q, want it to report the lease lost", line)
	}
	if line := h.line(t, 20*time.Second); !strings.HasPrefix(line, "renew refused true:") {
		t.Errorf("resumed holder's renewal: %q, want ErrNotHeld", line)
	}
	info, err := s.Inspect(testCtx(t, 10*time.Second), key)
	if err != nil || !info.Held || info.Fence != l.Fence() {
		t.Errorf("after the resumed holder's attempts: Inspect = %+v, %v; want held with fence %d", info, err, l.Fence())
	}
	if err := l.Err(); err != nil {
		t.Errorf("new holder's lease: %v", err)
	}
}

// TestRebootExpires: a lease and a queue written under another boot id (the
// host rebooted, its monotonic clock restarted) have expired; the fence stays.
func TestRebootExpires(t *testing.T) {
	s := newStore(t, "")
	ctx := testCtx(t, 10*time.Second)
	key := "reboot-" + randHex(4)
	r := req(key, "before-reboot", time.Hour)
	f := mustAcquire(t, s, r)
	w := req(key, "waiter", time.Hour)
	w.Queue = true
	if _, err := s.Acquire(ctx, w); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("queued Acquire of a held key: %v, want ErrHeld", err)
	}
	otherBoot := strconv.Quote("00000000-0000-4000-8000-000000000000")
	rewriteField(t, s.File(key), "boot", otherBoot)
	rewriteField(t, s.File(key), "queue-boot", otherBoot)
	s = newStore(t, s.Dir()) // a process started after the reboot
	info, err := s.Inspect(ctx, key)
	if err != nil || info.Held || info.Fence != f {
		t.Fatalf("after the simulated reboot: Inspect = %+v, %v; want free with fence %d", info, err, f)
	}
	if err := s.Renew(ctx, r); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew of a lease from another boot: %v, want ErrNotHeld", err)
	}
	// The waiter of the old boot no longer holds the key back.
	if f2 := mustAcquire(t, s, req(key, "after-reboot", time.Minute)); f2 != f+1 {
		t.Errorf("fence after the simulated reboot %d, want %d", f2, f+1)
	}
}
