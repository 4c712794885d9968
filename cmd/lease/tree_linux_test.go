// No process of lease run's command outlives lease run, however it ends:
// kill -9 of lease run, the command exiting with background, setsid'd and
// double-forked grandchildren left behind, a grandchild that ignores
// SIGTERM, and the loss of the lease.

package main_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// marker returns a unique "sleep" argument and registers a cleanup that
// kills whatever still carries it, so that a failing test leaves nothing.
func marker(t *testing.T) string {
	t.Helper()
	m := fmt.Sprintf("300.%09d", rand.N(1_000_000_000))
	t.Cleanup(func() {
		for _, p := range withMarker(m) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	return m
}

// withMarker returns the live processes whose command line contains m.
func withMarker(m string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cl, []byte(m)) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue // a zombie is dead
			}
		}
		out = append(out, pid)
	}
	return out
}

// waitMarked waits until n processes carry m.
func waitMarked(t *testing.T, m string, n int) {
	t.Helper()
	waitFor(t, 20*time.Second, fmt.Sprintf("%d processes with %s", n, m), func() bool { return len(withMarker(m)) >= n })
}

// noneMarked waits (up to 10 s) until no process carries m.
func noneMarked(t *testing.T, m, after string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(withMarker(m)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: processes %v survive 10 s later", after, withMarker(m))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// grandchildren is a shell script that starts three sleeps with argument m
// that would outlive their parent: in the background, in a new session, and
// double-forked (reparented at once).
func grandchildren(m string) string {
	return fmt.Sprintf(`sleep %[1]s & setsid sleep %[1]s & (sleep %[1]s &) ;`, m)
}

func TestRunKill9EndsTheWholeTree(t *testing.T) {
	store, key, m := fileStore(t), uniqueKey(t), marker(t)
	p, out := background(t, "run", "--store", store, key, "--grace", "1s", "--",
		"bash", "-c", grandchildren(m)+" wait")
	waitMarked(t, m, 3)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	noneMarked(t, m, "kill -9 of lease run")
	if t.Failed() {
		t.Log(out.String())
	}
}

func TestRunLeavesNothingBehind(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		atLeast      time.Duration // the grace: a process ignores SIGTERM
	}{
		{"exit-0", "%s exit 0", 0},
		{"exit-3", "%s exit 3", 0},
		{"ignores-SIGTERM", "%s (trap '' TERM; exec sleep %s) & exit 0", time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, key, m := fileStore(t), uniqueKey(t), marker(t)
			script := fmt.Sprintf(tc.script, grandchildren(m), m)
			if tc.atLeast == 0 {
				script = fmt.Sprintf(tc.script, grandchildren(m))
			}
			start := time.Now()
			r := lease(t, "run", "--store", store, key, "--grace", "1s", "--", "bash", "-c", script)
			took := time.Since(start)
			want := 0
			if tc.name == "exit-3" {
				want = 3
			}
			if r.code != want {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, want, r.stderr)
			}
			// Strict: nothing of the command is left when lease run exits
			// (it released the lease after the last one ended).
			if left := withMarker(m); len(left) > 0 {
				t.Errorf("processes %v survive lease run; stderr:\n%s", left, r.stderr)
			}
			if took < tc.atLeast {
				t.Errorf("lease run took %v: the process that ignores SIGTERM got SIGKILL before the 1s grace", took)
			}
			if s := statusOf(t, store, key); s.Held {
				t.Errorf("the lease is still held: %+v", s)
			}
		})
	}
}

func TestRunLossEndsTheWholeTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "leases")
	key, m := uniqueKey(t), marker(t)
	// The command starts grandchildren, then takes the lease away behind
	// lease run's back (deletes the lease file) and waits.
	script := grandchildren(m) + ` rm -f "$0"/*; wait`
	p, out := background(t, "run", "--store", "file://"+dir, key, "--ttl", "1s", "--grace", "1s", "--", "bash", "-c", script, dir)
	waitFor(t, 20*time.Second, "lease run to exit", p.exited)
	if c := p.code(); c != 76 {
		t.Errorf("exit %d, want 76; output:\n%s", c, out.String())
	}
	if left := withMarker(m); len(left) > 0 {
		t.Errorf("processes %v survive the loss; output:\n%s", left, out.String())
	}
}
