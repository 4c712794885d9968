// lease demo: the leasekit story told with real processes.

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/termtext"
	"github.com/leasekit/lease/leaseurl"
)

// demo is one run of lease demo.
type demo struct {
	out     io.Writer
	log     *slog.Logger
	exe     string
	storeU  string // the store URL given to the workers
	safeURL string
	key     string
	ttl     time.Duration
	regPath string
	wlevel  string
	start   time.Time
	store   driver.Store // the demo's own handle, for status lines
	events  chan workerEvent
	workers map[string]*demoWorker
	checks  []demoCheck
	// showRenewals prints the workers' renewals while true.
	showRenewals bool
	renewals     map[string]int
	// mayLose names a worker whose loss is expected now; lost records it.
	mayLose string
	lost    map[string]bool
}

type demoWorker struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

type demoCheck struct {
	what string
	ok   bool
}

// maxDemoTTL bounds lease demo --ttl: the story takes about 4.5 TTLs.
const maxDemoTTL = time.Minute

func newDemoCmd(stdout, stderr io.Writer) *cobra.Command {
	var c common
	var key, wlevel string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "demo [flags]",
		Short: "The leasekit story with real processes",
		Long: `Start three worker processes that compete for one key: one holds it, two wait;
the holder is killed with kill -9 and a waiter takes over with a larger fence;
the new holder is frozen past its TTL, and its late write with the old fence
is refused by a fenced register. Prints a timeline and a summary; exits 1 if
an expectation failed. Runs on a temporary file store unless --store is given
($LEASE_STORE is not read).`,
		Example: `  lease demo
  lease demo --ttl 1s -s redis://localhost:6379`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return exit(demoCommand(&c, key, wlevel, ttl, stdout, stderr))
		},
	}
	fs := cmd.Flags()
	c.flags(fs)
	fs.StringVar(&key, "key", "job:invoice-generation", "lease key the workers compete for")
	fs.DurationVarP(&ttl, "ttl", "t", 2*time.Second, "lease TTL (10ms to 1m; the demo lasts about 4.5 TTLs)")
	fs.StringVar(&wlevel, "worker-log-level", "error", "log level of the worker processes (their logs go to stderr)")
	fs.Lookup("store").Usage = "store URL (default: a file store in a new temporary directory)"
	skipEnv(fs, "store")
	withEnv(fs)
	return cmd
}

func demoCommand(c *common, key, wlevel string, ttl time.Duration, stdout, stderr io.Writer) int {
	if err := checkDuration("ttl", ttl, lease.MinTTL, maxDemoTTL); err != nil {
		return fail(stderr, "demo", exitUsage, "%v", err)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(wlevel)); err != nil {
		return fail(stderr, "demo", exitUsage, "--worker-log-level %q: want debug, info, warn or error", wlevel)
	}
	log, err := c.logger(stderr)
	if err != nil {
		return fail(stderr, "demo", exitUsage, "%v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(stderr, "demo", exitSoftware, "cannot find my own binary: %v", err)
	}
	dir, err := os.MkdirTemp("", "leasekit-demo-")
	if err != nil {
		return fail(stderr, "demo", exitSoftware, "%v", err)
	}
	defer os.RemoveAll(dir)
	if c.store == "" {
		c.store = "file://" + filepath.ToSlash(filepath.Join(dir, "leases"))
	}
	d := &demo{
		out: stdout, log: log, exe: exe, storeU: c.store, safeURL: leaseurl.Redact(c.store),
		key: key, ttl: ttl, regPath: filepath.Join(dir, "register.json"), wlevel: wlevel,
		events: make(chan workerEvent, 1024), workers: map[string]*demoWorker{}, renewals: map[string]int{}, lost: map[string]bool{},
	}
	ctx := context.Background()
	store, _, code, err := c.openStore(ctx, log)
	if err != nil {
		return fail(stderr, "demo", code, "%v", err)
	}
	defer store.Close()
	d.store = store
	d.start = time.Now()
	err = d.story(ctx, stderr)
	d.stopAll()
	return d.summary(err)
}

// say prints a timeline line; holders come from the store (--store may be
// shared), hence the escaping.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "%6.2fs  %s\n", time.Since(d.start).Seconds(), termtext.Escape(fmt.Sprintf(format, args...)))
}

// check records an expectation and prints it if it failed.
func (d *demo) check(ok bool, what string, args ...any) bool {
	c := demoCheck{what: fmt.Sprintf(what, args...), ok: ok}
	d.checks = append(d.checks, c)
	if !ok {
		d.say("EXPECTATION FAILED: %s", c.what)
	}
	return ok
}

// spawn starts a worker process.
func (d *demo) spawn(name string, stderr io.Writer) (*demoWorker, error) {
	cmd := exec.Command(d.exe, "demo-worker", "--key", d.key, "--ttl", d.ttl.String(),
		"--name", name, "--register", d.regPath, "--log-level", d.wlevel)
	// The URL may hold a password: the environment is readable only by our
	// user, a command line by everyone (ps).
	cmd.Env = append(os.Environ(), demoStoreEnv+"="+d.storeU)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C of the demo does not hit the workers first
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	w := &demoWorker{name: name, cmd: cmd, stdin: in, done: make(chan struct{})}
	d.workers[name] = w
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(outp)
		for sc.Scan() {
			var e workerEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				d.events <- e
			}
		}
		_ = cmd.Wait()
	}()
	return w, nil
}

func (w *demoWorker) send(order string) {
	_, _ = io.WriteString(w.stdin, order+"\n")
}

// await returns the first worker event that match accepts, handling the
// others on the way, or an error after timeout.
func (d *demo) await(timeout time.Duration, what string, match func(workerEvent) bool) (workerEvent, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case e := <-d.events:
			if e.Kind == "renewed" {
				d.renewals[e.Name]++
				if d.showRenewals {
					d.say("  %s renewed its lease (heartbeat, %v round trip)", e.Name, time.Duration(e.Micros)*time.Microsecond)
				}
			}
			if e.Kind == "lost" {
				d.lost[e.Name] = true
			}
			if e.Kind == "error" {
				return e, fmt.Errorf("%s failed: %s", e.Name, e.Err)
			}
			if match != nil && match(e) {
				return e, nil
			}
			if e.Kind == "acquired" || (e.Kind == "lost" && e.Name != d.mayLose) {
				d.say("(unexpected: %s %s, fence %d)", e.Name, e.Kind, e.Fence)
				d.check(false, "no unexpected %s event (%s)", e.Kind, e.Name)
			}
		case <-t.C:
			if match == nil {
				return workerEvent{}, nil
			}
			return workerEvent{}, fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

func is(name, kind string) func(workerEvent) bool {
	return func(e workerEvent) bool { return e.Name == name && e.Kind == kind }
}

// status prints the key's state as lease status would.
func (d *demo) status(ctx context.Context) lease.Info {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := d.store.Inspect(ictx, d.key)
	if err != nil {
		d.say("lease status: %v", err)
		return info
	}
	if info.Held {
		d.say("lease status %s: held by %s, fence %d, %v left", d.key, info.Holder, info.Fence, info.Remaining.Round(time.Millisecond))
	} else {
		d.say("lease status %s: free", d.key)
	}
	return info
}

// stopAll ends every worker: resumes stopped ones, closes their stdin (they
// then release and exit) and kills those that do not exit in time.
func (d *demo) stopAll() {
	for _, w := range d.workers {
		_ = syscall.Kill(w.cmd.Process.Pid, syscall.SIGCONT)
		_ = w.stdin.Close()
	}
	deadline := time.After(2*d.ttl + 5*time.Second)
	for _, w := range d.workers {
		select {
		case <-w.done:
		case <-deadline:
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	}
}

func (d *demo) summary(err error) int {
	fmt.Fprintln(d.out)
	failed := 0
	for _, c := range d.checks {
		mark := "ok  "
		if !c.ok {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(d.out, "  %s  %s\n", mark, termtext.Escape(c.what))
	}
	if err != nil {
		fmt.Fprintf(d.out, "  FAIL  the story could not finish: %s\n", termtext.Escape(err.Error()))
		failed++
	}
	if failed > 0 {
		fmt.Fprintf(d.out, "\nFAIL: %d expectation(s) failed (%.1fs)\n", failed, time.Since(d.start).Seconds())
		return exitFailed
	}
	fmt.Fprintf(d.out, "\nPASS: all %d expectations held (%.1fs)\n", len(d.checks), time.Since(d.start).Seconds())
	return exitOK
}

// story runs the scenario; an error means it could not go on.
func (d *demo) story(ctx context.Context, stderr io.Writer) error {
	ttl := d.ttl
	long := 3*ttl + 10*time.Second // generous bound for things expected within about a TTL
	d.say("store %s; key %s; TTL %v, heartbeat every %v", d.safeURL, d.key, ttl, (ttl / 3).Round(time.Millisecond))
	d.say("— 1. three worker processes compete for the lease")
	w1, err := d.spawn("worker-1", stderr)
	if err != nil {
		return err
	}
	e, err := d.await(long, "worker-1 to acquire", is("worker-1", "acquired"))
	if err != nil {
		return err
	}
	f1 := e.Fence
	d.say("worker-1 (pid %d) acquired the lease, fence %d", w1.cmd.Process.Pid, f1)
	for _, n := range []string{"worker-2", "worker-3"} {
		if _, err := d.spawn(n, stderr); err != nil {
			return err
		}
		e, err := d.await(long, n+" to start waiting", is(n, "waiting"))
		if err != nil {
			return err
		}
		d.say("%s: held by %s (fence %d, %d ms left) — waits politely", n, e.Holder, e.HolderFence, e.Millis)
		d.check(e.Holder == "worker-1", "%s sees worker-1 as the holder", n)
	}
	w1.send("write")
	e, err = d.await(long, "worker-1's write", is("worker-1", "write"))
	if err != nil {
		return err
	}
	d.say("worker-1 writes invoices with fence %d: %s", f1, writeResult(e))
	d.check(e.OK, "worker-1's write with fence %d is accepted", f1)

	d.say("— 2. the heartbeat keeps the lease past its TTL")
	d.showRenewals = true
	hold := ttl*5/2 + ttl/10
	if _, err := d.await(hold, "", nil); err != nil {
		return err
	}
	d.showRenewals = false
	w1.send("check")
	e, err = d.await(long, "worker-1's check", is("worker-1", "check"))
	if err != nil {
		return err
	}
	d.say("worker-1 still holds the lease after %.1f s (%.1f × TTL): %d renewals", hold.Seconds(), float64(hold)/float64(ttl), d.renewals["worker-1"])
	d.check(e.Held, "worker-1 still holds the lease after 2.5 × TTL")
	d.check(d.renewals["worker-1"] >= 2, "worker-1's heartbeat renewed the lease (%d renewals)", d.renewals["worker-1"])
	info := d.status(ctx)
	d.check(info.Held && info.Holder == "worker-1" && info.Fence == f1, "the store shows worker-1 holding fence %d", f1)

	d.say("— 3. worker-1 crashes (kill -9); a waiter takes over after about a TTL")
	if err := w1.cmd.Process.Kill(); err != nil {
		return err
	}
	killed := time.Now()
	d.say("kill -9 worker-1 (pid %d)", w1.cmd.Process.Pid)
	e, err = d.await(long, "a waiter to take over", func(e workerEvent) bool { return e.Kind == "acquired" })
	if err != nil {
		return err
	}
	took := time.Since(killed)
	next, f2 := d.workers[e.Name], e.Fence
	last := d.workers["worker-2"]
	if next == last {
		last = d.workers["worker-3"]
	}
	d.say("%s took over %.2f s after the crash, fence %d (> %d)", next.name, took.Seconds(), f2, f1)
	d.check(f2 > f1, "the new holder's fence %d is larger than worker-1's %d", f2, f1)
	d.check(took <= 2*ttl+2*time.Second, "the take-over came within about a TTL (%.2f s, TTL %v)", took.Seconds(), ttl)
	next.send("write")
	e, err = d.await(long, next.name+"'s write", is(next.name, "write"))
	if err != nil {
		return err
	}
	d.say("%s writes with fence %d: %s", next.name, f2, writeResult(e))
	d.check(e.OK, "%s's write with fence %d is accepted", next.name, f2)

	d.say("— 4. %s freezes (SIGSTOP) past its TTL, then wakes up and writes", next.name)
	next.send("check")
	if e, err = d.await(long, next.name+"'s check", is(next.name, "check")); err != nil {
		return err
	}
	d.say("%s checks its lease: held (%d ms left) — it is about to write…", next.name, e.Millis)
	if err := syscall.Kill(next.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		return err
	}
	stopped := time.Now()
	d.say("…and freezes: SIGSTOP %s (pid %d), as in a long GC pause", next.name, next.cmd.Process.Pid)
	e, err = d.await(long, last.name+" to take over", is(last.name, "acquired"))
	if err != nil {
		return err
	}
	f3 := e.Fence
	d.say("%s took over %.2f s later, fence %d (> %d)", last.name, time.Since(stopped).Seconds(), f3, f2)
	d.check(f3 > f2, "%s's fence %d is larger than the frozen holder's %d", last.name, f3, f2)
	last.send("write")
	e, err = d.await(long, last.name+"'s write", is(last.name, "write"))
	if err != nil {
		return err
	}
	d.say("%s writes with fence %d: %s", last.name, f3, writeResult(e))
	d.check(e.OK, "%s's write with fence %d is accepted", last.name, f3)
	if err := syscall.Kill(next.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		return err
	}
	d.mayLose = next.name // its heartbeat and its write now race
	d.say("SIGCONT %s: it resumes where it froze and writes with its old fence %d", next.name, f2)
	next.send("write-stale")
	e, err = d.await(long, next.name+"'s stale write", is(next.name, "write"))
	if err != nil {
		return err
	}
	d.say("the register: %s", writeResult(e))
	d.check(!e.OK && strings.Contains(e.Err, "stale fence"), "the resumed holder's write with fence %d is rejected", f2)
	if !d.lost[next.name] {
		if _, err := d.await(long, next.name+" to learn of its loss", is(next.name, "lost")); err != nil {
			return err
		}
	}
	d.say("%s learns it lost the lease and stops", next.name)
	d.check(true, "the resumed holder learns that it lost the lease")
	st, err := register{path: d.regPath}.read()
	if err != nil {
		return err
	}
	d.check(st.Fence == f3 && st.Value == "invoices by "+last.name, "the register keeps %s's write (fence %d)", last.name, f3)

	d.say("— 5. %s finishes and releases the lease", last.name)
	last.send("release")
	e, err = d.await(long, last.name+" to release", is(last.name, "released"))
	if err != nil {
		return err
	}
	d.check(e.OK, "%s releases the lease", last.name)
	info = d.status(ctx)
	d.check(!info.Held, "the lease is free at the end")
	return nil
}

func writeResult(e workerEvent) string {
	if e.OK {
		return "accepted"
	}
	return e.Err
}
