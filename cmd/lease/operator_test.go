// The operator's commands on the real binary: list, break and watch on
// every store, run -n, LEASE_* variables, completion and help.

package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// leaseWith runs the binary like lease, with env added to its environment.
func leaseWith(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(append(os.Environ(), "LEASE_STORE="), env...)
	cmd.WaitDelay = 5 * time.Second
	_ = cmd.Run()
	return result{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
}

// mustSupport fails the test if the store says it cannot list or
// break: every store can.
func mustSupport(t *testing.T, name string, r result) {
	t.Helper()
	if r.code == 69 && strings.Contains(r.stderr, "unsupported operation") {
		t.Fatalf("%s: the store should list and break: %s", name, r.stderr)
	}
}

type listedKey struct {
	Key     string `json:"key"`
	Kind    string `json:"kind"`
	N       int    `json:"n"`
	Holders []struct {
		ID          string `json:"id"`
		Holder      string `json:"holder"`
		Fence       uint64 `json:"fence"`
		RemainingMS int64  `json:"remaining_ms"`
	} `json:"holders"`
	Waiters []struct {
		ID string `json:"id"`
	} `json:"waiters"`
}

// listJSON runs lease list --json and decodes its lines.
func listJSON(t *testing.T, name, store, prefix string) []listedKey {
	t.Helper()
	r := lease(t, "list", "--json", "-s", store, prefix)
	mustSupport(t, name, r)
	if r.code != 0 {
		t.Fatalf("lease list --json: exit %d: %s", r.code, r.stderr)
	}
	var keys []listedKey
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var k listedKey
		if err := json.Unmarshal(sc.Bytes(), &k); err != nil {
			t.Fatalf("lease list --json printed %q: %v", sc.Text(), err)
		}
		keys = append(keys, k)
	}
	return keys
}

// TestListBreakWatchOnEveryStore: a holder and a waiter on a key are
// listed (table and JSON; the waiter where the store queues) and watched; break refuses without a terminal
// or --yes, then breaks: the holder's lease run exits 76 and the waiter
// gets a larger fence.
func TestListBreakWatchOnEveryStore(t *testing.T) {
	for name, store := range storesUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			key := uniqueKey(t)
			waiters := 1
			if noQueue[name] {
				waiters = 0
			}
			if r := lease(t, "list", "-s", store, key); r.code != 0 {
				mustSupport(t, name, r)
				t.Fatalf("lease list: exit %d: %s", r.code, r.stderr)
			}
			watcher, events := background(t, "watch", "-s", store, "-i", "100ms", "--json", key)
			waitFor(t, 20*time.Second, "lease watch to start", func() bool { return strings.Contains(events.String(), "watching") })
			time.Sleep(500 * time.Millisecond) // its first listing

			// 6 s: a break's tombstone lives until the evicted hold would have
			// expired, and lease watch must list it before then to say
			// "broken" (at 3 s a loaded machine made it miss ZooKeeper's).
			holder := holdInBackground(t, store, key, "--ttl", "6s")
			fenceFile := filepath.Join(t.TempDir(), "fence")
			waiter, waiterOut := background(t, "run", "-s", store, key, "--holder", "waiter", "--",
				"sh", "-c", `echo "$LEASE_FENCE" > "$0"`, fenceFile)
			var held listedKey
			waitFor(t, 20*time.Second, "the key listed with its waiter", func() bool {
				keys := listJSON(t, name, store, key)
				if len(keys) == 1 && len(keys[0].Waiters) == waiters && len(keys[0].Holders) == 1 {
					held = keys[0]
					return true
				}
				return false
			})
			if held.Key != key || held.Kind != "exclusive" || len(held.Holders) != 1 || held.Holders[0].Holder != "background" ||
				held.Holders[0].Fence == 0 || held.Holders[0].ID == "" {
				t.Errorf("listed: %+v", held)
			}
			r := lease(t, "list", "-s", store, key)
			if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 2 ||
				!strings.HasPrefix(lines[0], "KEY") || !strings.Contains(lines[1], key) || !strings.Contains(lines[1], "background") ||
				!strings.Contains(lines[1], held.Holders[0].ID) || !strings.HasSuffix(lines[1], " "+strconv.Itoa(waiters)) {
				t.Errorf("lease list: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
			}

			if watched(t, events, key, "acquired background"); waiters > 0 {
				watched(t, events, key, "queued")
			}
			r = lease(t, "break", "-s", store, key) // stdin is not a terminal
			if r.code != 64 || !strings.Contains(r.stderr, "--yes") || r.stdout != "" {
				t.Errorf("break without a terminal or --yes: exit %d, want 64 naming --yes:\n%s%s", r.code, r.stdout, r.stderr)
			}
			if !statusOf(t, store, key).Held {
				t.Fatal("the refused break freed the key")
			}
			r = lease(t, "break", "--yes", "-s", store, key)
			if r.code != 0 || !strings.Contains(r.stdout, "broke "+key+": holder background, id "+held.Holders[0].ID) {
				t.Fatalf("break --yes: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
			}
			waitFor(t, 20*time.Second, "the broken holder to exit", holder.exited)
			if c := holder.code(); c != 76 {
				t.Errorf("the broken holder's lease run: exit %d, want 76", c)
			}
			waitFor(t, 20*time.Second, "the waiter to run", waiter.exited)
			if c := waiter.code(); c != 0 {
				t.Fatalf("the waiter: exit %d: %s", c, waiterOut.String())
			}
			fence, _ := strconv.ParseUint(strings.TrimSpace(waitFile(t, fenceFile, time.Second)), 10, 64)
			if fence <= held.Holders[0].Fence {
				t.Errorf("the waiter's fence %d is not above the broken holder's %d", fence, held.Holders[0].Fence)
			}

			watched(t, events, key, "broken background")
			if watcher.exited() {
				t.Errorf("lease watch exited: %s", events.String())
			}
		})
	}
}

// noQueue are the stores of storesUnderTest that keep no queue of waiters:
// their waiter is not listed.
var noQueue = map[string]bool{"nats": true, "mysql": true, "mysql-getlock": true}

// canList skips the test unless the store can list.
func canList(t *testing.T, name, store string) {
	t.Helper()
	r := lease(t, "list", "-s", store, "nothing:")
	mustSupport(t, name, r)
	if r.code != 0 {
		t.Fatalf("lease list: exit %d: %s", r.code, r.stderr)
	}
}

// watched waits until lease watch --json has printed every change of key
// in want: a kind, and for a hold's change a space and its holder.
func watched(t *testing.T, events *syncBuffer, key string, want ...string) {
	t.Helper()
	seen := map[string]bool{}
	defer func() {
		if t.Failed() {
			t.Logf("lease watch printed:\n%s", events)
		}
	}()
	waitFor(t, 20*time.Second, fmt.Sprintf("lease watch to print %q", want), func() bool {
		for _, line := range strings.Split(events.String(), "\n") {
			var ch struct {
				Kind, Key string
				Holder    *struct{ Holder string }
			}
			if json.Unmarshal([]byte(line), &ch) != nil || ch.Key != key {
				continue
			}
			if ch.Holder != nil {
				ch.Kind += " " + ch.Holder.Holder
			}
			seen[ch.Kind] = true
		}
		return !slices.ContainsFunc(want, func(w string) bool { return !seen[w] })
	})
}

func TestBreakFreeKey(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	canList(t, "file", store)
	r := lease(t, "break", "-y", "-s", store, key)
	if r.code != 0 || r.stdout != key+" was not held: nothing broken\n" {
		t.Errorf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunSemaphore: -n N lets N commands hold the key at once, and lists
// them as slots of the semaphore.
func TestRunSemaphore(t *testing.T) {
	for name, store := range storesUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			key := uniqueKey(t)
			dir := t.TempDir()
			for i := range 2 {
				out := filepath.Join(dir, strconv.Itoa(i))
				p, log := background(t, "run", "-s", store, "-n", "2", key, "--", "sh", "-c", `echo "$LEASE_SEMAPHORE $LEASE_KEY" > "$0"; sleep 60`, out)
				got := waitFile(t, out, 20*time.Second)
				if !strings.HasPrefix(got, key+" "+key+"#sem") || p.exited() {
					t.Fatalf("slot %d: the command saw %q: %s", i, got, log.String())
				}
			}
			r := lease(t, "run", "-s", store, "-n", "2", "--no-wait", key, "--", "true")
			if r.code != 75 {
				t.Errorf("a third holder of 2 slots: exit %d, want 75: %s", r.code, r.stderr)
			}
			for _, bad := range [][]string{{"-n", "-1"}, {"-n", "1001"}, {"-n", "2", "--shared"}} {
				args := append(append([]string{"run", "-s", store}, bad...), key, "--", "true")
				if r := lease(t, args...); r.code != 64 {
					t.Errorf("lease %v: exit %d, want 64", args, r.code)
				}
			}
			canList(t, name, store)
			keys := listJSON(t, name, store, key)
			if len(keys) != 2 || keys[0].Kind != "semaphore" || keys[0].N != 2 || keys[1].Kind != "semaphore" {
				t.Errorf("listed: %+v", keys)
			}
			r = lease(t, "list", "-s", store, key)
			if r.code != 0 || strings.Count(r.stdout, "semaphore ") != 2 || !strings.Contains(r.stdout, key+"#sem") {
				t.Errorf("lease list: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
			}
		})
	}
}

// TestEnvironment: flags come from LEASE_* variables; the command line
// wins; --holder is not read from LEASE_HOLDER, which lease run sets.
func TestEnvironment(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	r := leaseWith(t, []string{"LEASE_STORE=" + store, "LEASE_TTL=5ms"}, "run", key, "--", "true")
	if r.code != 64 || !strings.Contains(r.stderr, "--ttl") {
		t.Errorf("LEASE_TTL=5ms: exit %d, want 64 naming --ttl: %s", r.code, r.stderr)
	}
	r = leaseWith(t, []string{"LEASE_STORE=" + store, "LEASE_TTL=5ms"}, "run", "-t", "1s", key, "--", "true")
	if r.code != 0 {
		t.Errorf("-t 1s over LEASE_TTL=5ms: exit %d: %s", r.code, r.stderr)
	}
	r = leaseWith(t, []string{"LEASE_TTL=abc"}, "status", "-s", store, key) // status has no --ttl
	if r.code != 0 {
		t.Errorf("LEASE_TTL for a command without --ttl: exit %d: %s", r.code, r.stderr)
	}
	r = leaseWith(t, []string{"LEASE_STORE=" + store, "LEASE_HOLDER=not-me", "LEASE_TIMEOUT=abc"}, "status", "--json", key)
	if r.code != 64 || !strings.Contains(r.stderr, "$LEASE_TIMEOUT") {
		t.Errorf("LEASE_TIMEOUT=abc: exit %d, want 64 naming it: %s", r.code, r.stderr)
	}
	holdInBackground(t, store, key)
	r = leaseWith(t, []string{"LEASE_STORE=" + store, "LEASE_NO_WAIT=true"}, "run", key, "--", "true")
	if r.code != 75 {
		t.Errorf("LEASE_NO_WAIT=true on a held key: exit %d, want 75: %s", r.code, r.stderr)
	}
	other := key + ":other"
	r = leaseWith(t, []string{"LEASE_STORE=" + store, "LEASE_HOLDER=not-me", "LEASE_KEY=" + key}, "run", other, "--", "sh", "-c", `echo "$LEASE_KEY $LEASE_HOLDER"`)
	if r.code != 0 || strings.Contains(r.stdout, "not-me") || !strings.HasPrefix(r.stdout, other+" ") {
		t.Errorf("LEASE_HOLDER and LEASE_KEY were read as flags: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
}

// TestDeprecatedKeyFlag: lease run --key, the old syntax, still works,
// with or without "--" before the command.
func TestDeprecatedKeyFlag(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	for _, args := range [][]string{
		{"run", "--store", store, "--key", key, "--", "sh", "-c", `echo "$LEASE_KEY"`},
		{"run", "--store", store, "--key", key, "echo", key},
	} {
		if r := lease(t, args...); r.code != 0 || r.stdout != key+"\n" {
			t.Errorf("lease %v: exit %d: %s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := lease(t, "run", "--store", store, key, "echo", "x"); r.code != 64 || !strings.Contains(r.stderr, "put -- between") {
		t.Errorf("KEY CMD without --: exit %d, want 64: %s", r.code, r.stderr)
	}
}

// TestCompletion: the scripts for bash, zsh and fish, and keys completed
// from the store.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_lease", "zsh": "#compdef lease", "fish": "complete -c lease"} {
		if r := lease(t, "completion", shell); r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s: exit %d, no %q: %s", shell, r.code, want, r.stderr)
		}
	}
	for name, store := range storesUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			canList(t, name, store)
			key := uniqueKey(t)
			holdInBackground(t, store, key)
			for _, args := range [][]string{
				{"__complete", "status", "-s", store, "test:"},
				{"__complete", "break", "-s", store, ""},
				{"__complete", "run", "-s", store, key[:10]},
				{"__complete", "list", "-s", store, ""},
			} {
				r := lease(t, args...)
				if r.code != 0 || !strings.Contains(r.stdout, key+"\texclusive\n") {
					t.Errorf("lease %v: exit %d, %q not offered:\n%s%s", args, r.code, key, r.stdout, r.stderr)
				}
			}
			r := leaseWith(t, []string{"LEASE_STORE=" + store}, "__complete", "status", "")
			if !strings.Contains(r.stdout, key+"\t") {
				t.Errorf("completion with LEASE_STORE: %q not offered:\n%s%s", key, r.stdout, r.stderr)
			}
		})
	}
}

// TestHelpHasExamples: every command's --help has examples, on stdout,
// exit 0.
func TestHelpHasExamples(t *testing.T) {
	for _, cmd := range []string{"run", "status", "list", "break", "watch", "demo", "verify", "completion"} {
		r := lease(t, cmd, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "Examples:") {
			t.Errorf("lease %s --help: exit %d, no examples:\n%s%s", cmd, r.code, r.stdout, r.stderr)
		}
	}
}

// TestBreakAsksOnTerminal: on a terminal (script(1)'s pseudo-terminal),
// lease break names the holder and breaks only after "y".
func TestBreakAsksOnTerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to give lease break a terminal")
	}
	store, key := fileStore(t), uniqueKey(t)
	holdInBackground(t, store, key)
	onTTY := func(answer string) result {
		cmd := exec.Command(script, "-q", "-e", "-c", bin+" break -s '"+store+"' '"+key+"'", "/dev/null")
		cmd.Stdin = strings.NewReader(answer + "\n")
		cmd.Env = append(os.Environ(), "LEASE_STORE=")
		out, _ := cmd.CombinedOutput()
		return result{code: cmd.ProcessState.ExitCode(), stdout: string(out)}
	}
	r := onTTY("n")
	if r.code != 1 || !strings.Contains(r.stdout, "is held by background") || !strings.Contains(r.stdout, "not broken") {
		t.Errorf("answer n: exit %d, want 1:\n%s", r.code, r.stdout)
	}
	if !statusOf(t, store, key).Held {
		t.Fatal("the key was broken after the answer n")
	}
	canList(t, "file", store)
	if r := onTTY("y"); r.code != 0 || !strings.Contains(r.stdout, "broke "+key+": holder background") {
		t.Errorf("answer y: exit %d:\n%s", r.code, r.stdout)
	}
}
