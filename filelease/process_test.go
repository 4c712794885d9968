//go:build linux

// Cross-process tests: the test binary re-executes itself as helper processes
// (see TestMain) that race for a key, or hold one and are then killed with
// SIGKILL or frozen with SIGSTOP.

package filelease_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/internal/proctest"
	"golang.org/x/sys/unix"
)

// Environment of a helper process.
const (
	helperEnv = "FILELEASE_TEST_HELPER" // the helper's mode: "race" or "hold"
	dirEnv    = "FILELEASE_TEST_DIR"
	keyEnv    = "FILELEASE_TEST_KEY"
	ttlEnv    = "FILELEASE_TEST_TTL"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// runHelper is the body of a helper process. It reports on stdout, one line
// per event, and exits when stdin closes (or it is killed).
func runHelper(mode string) int {
	ttl, err := time.ParseDuration(os.Getenv(ttlEnv))
	if err != nil {
		fmt.Printf("error bad TTL: %v\n", err)
		return 2
	}
	key := os.Getenv(keyEnv)
	store, err := filelease.New(os.Getenv(dirEnv))
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 2
	}
	c, err := lease.New(store, lease.WithTTL(ttl), lease.WithHolder(fmt.Sprintf("helper-%d", os.Getpid())))
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 2
	}
	defer c.Close()
	stdin := bufio.NewReader(os.Stdin)
	ctx := context.Background()
	switch mode {
	case "race":
		// Several goroutines of this process race with the other processes.
		fmt.Println("ready")
		if _, err := stdin.ReadString('\n'); err != nil {
			return 2
		}
		const tries = 4
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := c.TryAcquire(ctx, key)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					fmt.Printf("won %d\n", l.Fence())
				case errors.Is(err, lease.ErrHeld):
					fmt.Println("held")
				default:
					fmt.Printf("error %v\n", err)
				}
			}()
		}
		wg.Wait()
		fmt.Println("done")
	case "hold":
		l, err := c.TryAcquire(ctx, key)
		if err != nil {
			fmt.Printf("error %v\n", err)
			return 2
		}
		fmt.Printf("acquired %d\n", l.Fence())
		<-l.Done()
		fmt.Printf("lost %v\n", l.Err())
		// Renew directly in the store with the lost lease's token.
		err = store.Renew(ctx, lease.Request{Key: key, Token: l.Token(), TTL: ttl})
		switch {
		case errors.Is(err, lease.ErrNotHeld):
			fmt.Println("renew notheld")
		default:
			fmt.Printf("renew %v\n", err)
		}
	default:
		fmt.Printf("error unknown mode %q\n", mode)
		return 2
	}
	_, _ = io.Copy(io.Discard, stdin)
	return 0
}

// helper is a running helper process.
type helper struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startHelper starts a helper process in mode for key in dir, killed at the
// end of the test if it is still running.
func startHelper(t *testing.T, mode, dir, key string, ttl time.Duration) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, dirEnv+"="+dir, keyEnv+"="+key, ttlEnv+"="+ttl.String(),
		"GORACE=atexit_sleep_ms=0") // under -race, exit at once (not after 1s)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a helper process: %v", err)
	}
	h := &helper{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return h
}

// line returns the helper's next output line, failing the test after d.
func (h *helper) line(d time.Duration) string {
	h.t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			h.t.Fatalf("helper %d exited without more output", h.cmd.Process.Pid)
		}
		return l
	case <-time.After(d):
		h.t.Fatalf("no output from helper %d within %v", h.cmd.Process.Pid, d)
	}
	return ""
}

// fenceOf parses "<word> <fence>".
func fenceOf(t *testing.T, line, word string) uint64 {
	t.Helper()
	f, ok := strings.CutPrefix(line, word+" ")
	n, err := strconv.ParseUint(f, 10, 64)
	if !ok || err != nil {
		t.Fatalf("helper said %q, want %q and a fence", line, word)
	}
	return n
}

// TestCrossProcessRace: several processes, each with several goroutines,
// race for one key; exactly one attempt wins.
func TestCrossProcessRace(t *testing.T) {
	s := newStore(t, "")
	key := "race-" + randHex(4)
	const procs, tries = 5, 4
	hs := make([]*helper, procs)
	for i := range hs {
		hs[i] = startHelper(t, "race", s.Dir(), key, 30*time.Second)
	}
	for _, h := range hs {
		if l := h.line(60 * time.Second); l != "ready" {
			t.Fatalf("helper said %q, want ready", l)
		}
	}
	t.Logf("%d helpers ready", procs)
	for _, h := range hs {
		if _, err := io.WriteString(h.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	var won []uint64
	for _, h := range hs {
		for range tries {
			switch l := h.line(30 * time.Second); {
			case l == "held":
			case strings.HasPrefix(l, "won "):
				won = append(won, fenceOf(t, l, "won"))
			default:
				t.Errorf("helper said %q", l)
			}
		}
		if l := h.line(30 * time.Second); l != "done" {
			t.Errorf("helper said %q, want done", l)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d of %d attempts in %d processes won, want exactly 1 (fences %v)", len(won), procs*tries, procs, won)
	}
	info, err := s.Inspect(testCtx(t, 10*time.Second), key)
	if err != nil || !info.Held || info.Fence != won[0] || !strings.HasPrefix(info.Holder, "helper-") {
		t.Errorf("after the race: Inspect = %+v, %v; want held by a helper with fence %d", info, err, won[0])
	}
	// The helpers exit when stdin closes; the winner's Client releases.
	for _, h := range hs {
		_ = h.stdin.Close()
		if err := h.cmd.Wait(); err != nil {
			t.Errorf("helper exit: %v", err)
		}
	}
	info, err = s.Inspect(testCtx(t, 10*time.Second), key)
	if err != nil || info.Held || info.Fence != won[0] {
		t.Errorf("after the helpers exited: Inspect = %+v, %v; want free with fence %d", info, err, won[0])
	}
}

// TestKilledHolderExpires: a holder killed with SIGKILL loses its lease after
// its TTL; a waiter in another process then acquires it with a larger fence.
func TestKilledHolderExpires(t *testing.T) {
	s := newStore(t, "")
	key := "killed-" + randHex(4)
	const ttl = time.Second
	h := startHelper(t, "hold", s.Dir(), key, ttl)
	fence := fenceOf(t, h.line(60*time.Second), "acquired")
	time.Sleep(ttl / 2) // a renewal or so
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = h.cmd.Wait()

	c, err := lease.New(s, lease.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l, err := c.Acquire(testCtx(t, 30*time.Second), key)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	took := time.Since(killed)
	t.Logf("acquired %v after SIGKILL (TTL %v)", took.Round(time.Millisecond), ttl)
	// The killed holder renewed at most TTL/3 (its renew interval) before it
	// died, so its lease outlives it by at least 2/3 of the TTL.
	if took < ttl/2 {
		t.Errorf("acquired %v after SIGKILL, before the holder's TTL could have run out", took)
	}
	if took > ttl+10*time.Second {
		t.Errorf("acquired %v after SIGKILL, want within the TTL plus a generous margin", took)
	}
	if l.Fence() <= fence {
		t.Errorf("fence after the killed holder %d, want > %d", l.Fence(), fence)
	}
}

// TestStoppedHolderLoses: a holder frozen with SIGSTOP past its TTL loses the
// lease to another process; once resumed, it reports the lease lost and its
// renewal is refused with ErrNotHeld, and the new holder is intact.
func TestStoppedHolderLoses(t *testing.T) {
	s := newStore(t, "")
	key := "stopped-" + randHex(4)
	const ttl = time.Second
	h := startHelper(t, "hold", s.Dir(), key, ttl)
	fence := fenceOf(t, h.line(60*time.Second), "acquired")
	time.Sleep(ttl / 2)
	proctest.StopOutsideLock(t, h.cmd.Process.Pid, s.File(key))
	stopped := time.Now()

	c, err := lease.New(s, lease.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l, err := c.Acquire(testCtx(t, 30*time.Second), key)
	if err != nil {
		t.Fatalf("Acquire while the holder is stopped: %v", err)
	}
	took := time.Since(stopped)
	t.Logf("acquired %v after SIGSTOP (TTL %v)", took.Round(time.Millisecond), ttl)
	if took < ttl/2 || took > ttl+10*time.Second {
		t.Errorf("acquired %v after SIGSTOP, want after about the TTL %v", took, ttl)
	}
	if l.Fence() <= fence {
		t.Errorf("fence after the stopped holder %d, want > %d", l.Fence(), fence)
	}
	if err := unix.Kill(h.cmd.Process.Pid, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if line := h.line(20 * time.Second); !strings.HasPrefix(line, "lost ") {
		t.Fatalf("resumed holder said %q, want it to report the lease lost", line)
	} else {
		t.Logf("resumed holder: %s", line)
	}
	if line := h.line(20 * time.Second); line != "renew notheld" {
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
