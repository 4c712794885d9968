//go:build linux

// Cross-process election tests on every store: the test binary re-executes
// itself as candidate processes (see TestMain) that run Election.Run; the
// leader is killed with SIGKILL, or frozen with SIGSTOP and resumed.

package election_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/election"
	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/internal/proctest"
)

// Environment of a candidate process.
const (
	helperEnv = "ELECTION_TEST_HELPER" // the store kind; set only in helpers
	nsEnv     = "ELECTION_TEST_NS"
	keyEnv    = "ELECTION_TEST_KEY"
	ttlEnv    = "ELECTION_TEST_TTL"
)

func TestMain(m *testing.M) {
	if kind := os.Getenv(helperEnv); kind != "" {
		os.Exit(runCandidate(kind))
	}
	os.Exit(m.Run())
}

// runCandidate is the body of a candidate process: Election.Run until stdin
// closes, reporting on stdout "leading <fence>" when a term starts and
// "stopped <fence> <cause>" when its leaderCtx is cancelled.
func runCandidate(kind string) int {
	ttl, err := time.ParseDuration(os.Getenv(ttlEnv))
	if err != nil {
		fmt.Printf("error bad TTL: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
	store, closeAll, err := openStore(octx, kind, os.Getenv(nsEnv))
	ocancel()
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 2
	}
	defer closeAll()
	c, err := lease.New(store, lease.WithTTL(ttl))
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 2
	}
	defer c.Close()
	e, err := election.New(c, os.Getenv(keyEnv), election.WithIdentity(fmt.Sprintf("cand-%d", os.Getpid())))
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 2
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	fmt.Println("ready")
	err = e.Run(ctx, func(leaderCtx context.Context) {
		f := election.LeaseFrom(leaderCtx).Fence()
		fmt.Printf("leading %d\n", f)
		<-leaderCtx.Done()
		fmt.Printf("stopped %d %v\n", f, context.Cause(leaderCtx))
	})
	if !errors.Is(err, context.Canceled) {
		fmt.Printf("error Run: %v\n", err)
		return 2
	}
	return 0
}

// candidate is a running candidate process.
type candidate struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
}

func (c *candidate) identity() string { return fmt.Sprintf("cand-%d", c.cmd.Process.Pid) }

// startCandidate starts a candidate process for key on store kind k over ns,
// killed at the end of the test if it is still running, and waits until it
// is ready.
func startCandidate(t *testing.T, k storeKind, ns, key string) *candidate {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+k.name, nsEnv+"="+ns, keyEnv+"="+key, ttlEnv+"="+k.ttl.String(),
		"GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	if _, err := cmd.StdinPipe(); err != nil { // closed when the test kills it
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a candidate process: %v", err)
	}
	c := &candidate{t: t, cmd: cmd, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if l := c.line(60 * time.Second); l != "ready" {
		t.Fatalf("candidate said %q, want ready", l)
	}
	return c
}

// line returns the candidate's next output line, failing the test after d.
func (c *candidate) line(d time.Duration) string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("candidate %d exited without more output", c.cmd.Process.Pid)
		}
		return l
	case <-time.After(d):
		c.t.Fatalf("no output from candidate %d within %v", c.cmd.Process.Pid, d)
	}
	return ""
}

// said returns the candidate's next line if it comes within d.
func (c *candidate) said(d time.Duration) (string, bool) {
	select {
	case l, ok := <-c.lines:
		return l, ok
	case <-time.After(d):
		return "", false
	}
}

// quiet fails the test if the candidate says anything within d.
func (c *candidate) quiet(d time.Duration, why string) {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if ok {
			c.t.Errorf("candidate %d said %q %s", c.cmd.Process.Pid, l, why)
		}
	case <-time.After(d):
	}
}

// leading parses "leading <fence>".
func leading(t *testing.T, line string) uint64 {
	t.Helper()
	f, ok := strings.CutPrefix(line, "leading ")
	n, err := strconv.ParseUint(f, 10, 64)
	if !ok || err != nil {
		t.Fatalf("candidate said %q, want \"leading <fence>\"", line)
	}
	return n
}

// crashSetup makes a namespace for a cross-process test on k: a store for
// the test itself (an observer) and the namespace to give candidates.
func crashSetup(t *testing.T, k storeKind) (driver.Store, string) {
	ns := "el" + randHex(6)
	if k.name == "file" {
		ns = filepath.Join(t.TempDir(), "leases")
	}
	if k.name == "redis" {
		cleanupRedis(t, ns)
	}
	return testStore(t, k, ns), ns
}

// observeInto starts an observer over s, returning a function that stops it
// and returns what it delivered.
func observeInto(t *testing.T, s driver.Store, k storeKind, key string) func() []election.Leader {
	c, err := lease.New(s, lease.WithTTL(k.ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	e, err := election.New(c, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := e.Observe(ctx)
	got := make(chan []election.Leader, 1)
	go func() {
		var ls []election.Leader
		for l := range ch {
			ls = append(ls, l)
		}
		got <- ls
	}()
	return func() []election.Leader {
		cancel()
		return <-got
	}
}

// wantLeaders checks the leaders Observe delivered, vacancies aside.
func wantLeaders(t *testing.T, got []election.Leader, want ...election.Leader) {
	t.Helper()
	held := heldOnly(got)
	if len(held) != len(want) || !isSubsequence(held, want) {
		t.Errorf("Observe delivered %+v, want leaders %+v in this order", got, want)
	}
}

// wantTermsThen checks the leaders Observe delivered, vacancies aside:
// first, then maybe more terms of first's candidate (on a loaded machine
// it may lose a term by its own deadline and win the key again, TTL 500
// ms), with increasing fences, and last.
func wantTermsThen(t *testing.T, got []election.Leader, first, last election.Leader) {
	t.Helper()
	held := heldOnly(got)
	ok := len(held) >= 2 && held[0] == first && held[len(held)-1] == last
	for i := 1; ok && i < len(held)-1; i++ {
		ok = held[i].Identity == first.Identity && held[i].Fence > held[i-1].Fence
	}
	if !ok {
		t.Errorf("Observe delivered %+v, want %+v (then maybe more terms of %s), then %+v", got, first, first.Identity, last)
	}
}

// heldOnly returns the leaders of ls, by identity and fence.
func heldOnly(ls []election.Leader) []election.Leader {
	var held []election.Leader
	for _, l := range ls {
		if l.Held {
			held = append(held, election.Leader{Identity: l.Identity, Fence: l.Fence})
		}
	}
	return held
}

// isSubsequence tells whether every leader of sub is in ls, in order.
func isSubsequence(sub, ls []election.Leader) bool {
	for _, l := range ls {
		if len(sub) > 0 && sub[0] == l {
			sub = sub[1:]
		}
	}
	return len(sub) == 0
}

// TestLeaderKilled: the leader process is killed with SIGKILL; the other
// candidate leads within about a TTL, with a larger fence, and an observer
// sees both leaders in order (see wantTermsThen).
func TestLeaderKilled(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			s, ns := crashSetup(t, k)
			key := "killed-" + randHex(4)
			stop := observeInto(t, s, k, key)
			a := startCandidate(t, k, ns, key)
			f1 := leading(t, a.line(30*time.Second))
			b := startCandidate(t, k, ns, key)
			b.quiet(k.ttl/2, "while the other candidate leads")
			if err := a.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			f2 := leading(t, b.line(2*k.ttl+10*time.Second))
			took := time.Since(killed)
			t.Logf("%s: a new leader %v after SIGKILL (TTL %v)", k.name, took.Round(time.Millisecond), k.ttl)
			if f2 <= f1 {
				t.Errorf("new leader's fence %d, want > %d", f2, f1)
			}
			// The killed leader renewed at most a renew interval before it
			// died and its store rounds the TTL up by at most a second.
			if took > 2*k.ttl+2*time.Second {
				t.Errorf("a new leader %v after SIGKILL, want within about the TTL %v", took, k.ttl)
			}
			time.Sleep(k.ttl / 2) // let the observer see the new leader
			wantTermsThen(t, stop(), election.Leader{Identity: a.identity(), Fence: f1}, election.Leader{Identity: b.identity(), Fence: f2})
		})
	}
}

// TestLeaderPaused: the leader process is frozen with SIGSTOP past its TTL;
// the other candidate leads with a larger fence; resumed, the old leader
// reports its term stopped (leaderCtx cancelled, lease lost) and stays a
// follower. (On a loaded machine the leader may lose a term and win the
// next before the stop: the terms it announced are the ones expected.)
func TestLeaderPaused(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			s, ns := crashSetup(t, k)
			key := "paused-" + randHex(4)
			stop := observeInto(t, s, k, key)
			a := startCandidate(t, k, ns, key)
			f1 := leading(t, a.line(30*time.Second))
			b := startCandidate(t, k, ns, key)
			b.quiet(k.ttl/2, "while the other candidate leads")
			if fs, ok := s.(*filelease.Store); ok {
				proctest.StopOutsideLock(t, a.cmd.Process.Pid, fs.File(key))
			} else if err := unix.Kill(a.cmd.Process.Pid, unix.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			// On a loaded machine a may have lost its term by its own
			// deadline before the stop (TTL 500 ms), and won the key
			// again: what it said then waits in the pipe.
			terms, leads := []election.Leader{{Identity: a.identity(), Fence: f1}}, true
			for {
				l, ok := a.said(300 * time.Millisecond)
				if !ok {
					break
				}
				t.Logf("%s: before the stop, the leader said %q", k.name, l)
				if strings.HasPrefix(l, "leading ") {
					f1, leads = leading(t, l), true
					terms = append(terms, election.Leader{Identity: a.identity(), Fence: f1})
				} else if leads = false; !strings.HasPrefix(l, fmt.Sprintf("stopped %d ", f1)) {
					t.Fatalf("the leader said %q, want its term %d stopped", l, f1)
				}
			}
			f2 := leading(t, b.line(2*k.ttl+10*time.Second))
			t.Logf("%s: a new leader %v after SIGSTOP (TTL %v)", k.name, time.Since(stopped).Round(time.Millisecond), k.ttl)
			if f2 <= f1 {
				t.Errorf("new leader's fence %d, want > %d", f2, f1)
			}
			if err := unix.Kill(a.cmd.Process.Pid, unix.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if leads {
				resumed := time.Now()
				line := a.line(10 * time.Second)
				t.Logf("%s: resumed leader said %q after %v", k.name, line, time.Since(resumed).Round(time.Millisecond))
				if !strings.HasPrefix(line, fmt.Sprintf("stopped %d ", f1)) || !strings.Contains(line, "lost") {
					t.Errorf("resumed leader said %q, want its term %d stopped with the lease lost", line, f1)
				}
			}
			a.quiet(k.ttl, "after resuming, while the other candidate leads")
			want := append(terms, election.Leader{Identity: b.identity(), Fence: f2})
			if len(terms) == 1 {
				wantLeaders(t, stop(), want...)
				return
			}
			// A term lost by its own deadline may be over before the
			// observer's next read: it sees some of a's terms, then b's.
			got := stop()
			if held := heldOnly(got); len(held) == 0 || !isSubsequence(held, want) || held[len(held)-1] != want[len(want)-1] {
				t.Errorf("Observe delivered %+v, want some of the leaders %+v in this order, the last one included", got, want)
			}
		})
	}
}
