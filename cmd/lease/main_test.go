package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/leasetest"
)

// bin is the lease binary, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lease-bin-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "lease")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// lease runs the binary to completion (bounded by 60 s).
func lease(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "LEASE_STORE=")
	// A process lease run left behind may hold the output pipes open: do
	// not wait for it.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("lease %v: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
}

// proc is a lease process running in the background.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// code is the exit code; call it after exited() is true.
func (p *proc) code() int { <-p.done; return p.cmd.ProcessState.ExitCode() }

// background starts the binary and returns it; the test kills it at the end.
func background(t *testing.T, args ...string) (*proc, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second // as in lease: survivors may hold the pipe
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p, out
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func fileStore(t *testing.T) string { return "file://" + filepath.Join(t.TempDir(), "leases") }

func uniqueKey(t *testing.T) string {
	return fmt.Sprintf("test:%s:%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
}

type status struct {
	Key         string `json:"key"`
	Held        bool   `json:"held"`
	Holder      string `json:"holder"`
	Fence       uint64 `json:"fence"`
	RemainingMS int64  `json:"remaining_ms"`
	Store       string `json:"store"`
	Shared      bool   `json:"shared"`
	Readers     int    `json:"readers"`
}

func statusOf(t *testing.T, store, key string) status {
	t.Helper()
	r := lease(t, "status", "--json", "--store", store, key)
	if r.code != 0 {
		t.Fatalf("lease status: exit %d: %s", r.code, r.stderr)
	}
	var s status
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("lease status --json printed %q: %v", r.stdout, err)
	}
	return s
}

// waitFor polls cond every 50 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitFile(t *testing.T, path string, d time.Duration) string {
	t.Helper()
	var b []byte
	waitFor(t, d, path, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil && len(b) > 0
	})
	return string(b)
}

func TestRunExitCodes(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	for _, tc := range []struct {
		script string
		want   int
	}{{"exit 0", 0}, {"exit 7", 7}, {"kill -TERM $$", 128 + 15}} {
		r := lease(t, "run", "--store", store, key, "--", "sh", "-c", tc.script)
		if r.code != tc.want {
			t.Errorf("%q: exit %d, want %d; stderr:\n%s", tc.script, r.code, tc.want, r.stderr)
		}
	}
	if r := lease(t, "run", "--store", store, key, "--", "/nonexistent/cmd"); r.code != 127 {
		t.Errorf("missing command: exit %d, want 127", r.code)
	}
	if r := lease(t, "run", "--store", store, "--", "true"); r.code != 64 {
		t.Errorf("without KEY: exit %d, want 64", r.code)
	}
	if r := lease(t, "run", "--store", "gopher://x", key, "--", "true"); r.code != 64 {
		t.Errorf("unknown scheme: exit %d, want 64: %s", r.code, r.stderr)
	}
	if s := statusOf(t, store, key); s.Held {
		t.Errorf("the lease is still held after the runs: %+v", s)
	}
}

func TestRunEnvironment(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	out := filepath.Join(t.TempDir(), "env")
	r := lease(t, "run", "--store", store, key, "--holder", "tester", "--",
		"sh", "-c", `printf '%s\n%s\n%s\n%s\n' "$LEASE_KEY" "$LEASE_TOKEN" "$LEASE_FENCE" "$LEASE_HOLDER" > "$0"`, out)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 || lines[0] != key || len(lines[1]) != 32 || lines[2] == "" || lines[2] == "0" || lines[3] != "tester" {
		t.Fatalf("child saw LEASE_KEY, LEASE_TOKEN, LEASE_FENCE, LEASE_HOLDER = %q", lines)
	}
	// A second run gets a larger fence.
	r = lease(t, "run", "--store", store, key, "--", "sh", "-c", `echo "$LEASE_FENCE" > "$0"`, out)
	b2, _ := os.ReadFile(out)
	var f1, f2 uint64
	fmt.Sscan(lines[2], &f1)
	fmt.Sscan(string(b2), &f2)
	if r.code != 0 || f2 <= f1 {
		t.Errorf("second run: exit %d, fence %d after %d", r.code, f2, f1)
	}
}

// TestRunSeveralKeys: several KEYs hold every key or none; the command
// gets each key's fence, in key order.
func TestRunSeveralKeys(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	a, b := key+":a", key+":b"
	out := filepath.Join(t.TempDir(), "env")
	r := lease(t, "run", "--store", store, b, a, "--",
		"sh", "-c", `printf '%s %s %s %s %s\n' "$LEASE_KEY_COUNT" "$LEASE_KEY_1" "$LEASE_FENCE_1" "$LEASE_KEY_2" "$LEASE_FENCE_2" > "$0"`, out)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("2 %s 1 %s 1\n", a, b); string(got) != want {
		t.Errorf("child saw %q, want %q", got, want)
	}
	holdInBackground(t, store, b)
	r = lease(t, "run", "--store", store, a, b, "--no-wait", "--", "true")
	if r.code != 75 || !strings.Contains(r.stderr, "background") {
		t.Errorf("--no-wait with %s held: exit %d, want 75 and the holder named; stderr:\n%s", b, r.code, r.stderr)
	}
	if statusOf(t, store, a).Held {
		t.Errorf("%s is held after lease run gave up on %s", a, b)
	}
}

// TestRunShared: readers run side by side with one fence and LEASE_SHARED
// set, a writer is refused while they hold, and --shared takes one key.
func TestRunShared(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	holdInBackground(t, store, key, "--shared")
	out := filepath.Join(t.TempDir(), "env")
	r := lease(t, "run", "--store", store, key, "--shared", "--no-wait", "--",
		"sh", "-c", `printf '%s %s\n' "$LEASE_SHARED" "$LEASE_FENCE" > "$0"`, out)
	if r.code != 0 {
		t.Fatalf("a second reader: exit %d: %s", r.code, r.stderr)
	}
	st := statusOf(t, store, key)
	if got, err := os.ReadFile(out); err != nil || string(got) != fmt.Sprintf("1 %d\n", st.Fence) {
		t.Errorf("the second reader saw %q (%v), want LEASE_SHARED=1 and the epoch's fence %d", got, err, st.Fence)
	}
	if !st.Held || !st.Shared || st.Readers != 1 || st.Holder != "background" {
		t.Errorf("status while one reader holds = %+v, want held shared by the background reader", st)
	}
	r = lease(t, "run", "--store", store, key, "--no-wait", "--", "true")
	if r.code != 75 || !strings.Contains(r.stderr, "background") {
		t.Errorf("a writer with --no-wait: exit %d, want 75 and the reader named; stderr:\n%s", r.code, r.stderr)
	}
	r = lease(t, "run", "--store", store, key, key+":b", "--shared", "--", "true")
	if r.code != 64 {
		t.Errorf("--shared with two keys: exit %d, want 64; stderr:\n%s", r.code, r.stderr)
	}
}

// holdInBackground runs "lease run -- sleep 60" on key and waits until the
// store shows it held.
func holdInBackground(t *testing.T, store, key string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"run", "--store", store, key, "--holder", "background"}, extra...)
	cmd, out := background(t, append(args, "--", "sleep", "60")...)
	waitFor(t, 20*time.Second, "the background holder", func() bool {
		if cmd.exited() {
			t.Fatalf("background lease run exited: %s", out.String())
		}
		return statusOf(t, store, key).Held
	})
	return cmd
}

func TestRunNotAcquired(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	holdInBackground(t, store, key)
	r := lease(t, "run", "--store", store, key, "--no-wait", "--", "true")
	if r.code != 75 || !strings.Contains(r.stderr, "background") {
		t.Errorf("--no-wait: exit %d, want 75 and the holder named; stderr:\n%s", r.code, r.stderr)
	}
	start := time.Now()
	r = lease(t, "run", "--store", store, key, "--timeout", "1s", "--", "true")
	if r.code != 75 {
		t.Errorf("--timeout 1s: exit %d, want 75; stderr:\n%s", r.code, r.stderr)
	}
	if d := time.Since(start); d < time.Second || d > 20*time.Second {
		t.Errorf("--timeout 1s took %v", d)
	}
}

// TestRunQueueFull: with the key held and its queue full (max_waiters=1, one
// waiter queued), lease run exits 75 (EX_TEMPFAIL) at once, saying so,
// instead of waiting.
func TestRunQueueFull(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "leases")
	store, key := "file://"+dir+"?max_waiters=1", uniqueKey(t)
	holdInBackground(t, store, key)
	waiter, out := background(t, "run", "--store", store, key, "--holder", "waiter", "--", "true")
	waitFor(t, 20*time.Second, "the waiter to queue", func() bool {
		if waiter.exited() {
			t.Fatalf("the waiter exited: %s", out.String())
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "\nwaiters 1\n") {
				return true
			}
		}
		return false
	})
	start := time.Now()
	r := lease(t, "run", "--store", store, key, "--timeout", "30s", "--", "true")
	if r.code != 75 || !strings.Contains(r.stderr, "queue of waiters is full") || !strings.Contains(r.stderr, "max_waiters") {
		t.Errorf("third run: exit %d, want 75 and a queue-full message; stderr:\n%s", r.code, r.stderr)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the third run took %v: it waited instead of exiting at once", d)
	}
	t.Logf("third run: exit %d after %v: %s", r.code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
	if waiter.exited() {
		t.Errorf("the queued waiter exited: %s", out.String())
	}
}

func TestRunForwardsSignals(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	dir := t.TempDir()
	script := `trap 'echo term > "$0/got"; exit 3' TERM; echo ready > "$0/ready"; while :; do sleep 0.1; done`
	cmd, out := background(t, "run", "--store", store, key, "--", "sh", "-c", script, dir)
	waitFile(t, filepath.Join(dir, "ready"), 20*time.Second)
	if err := cmd.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "lease run to exit", func() bool { return cmd.exited() })
	if got := waitFile(t, filepath.Join(dir, "got"), time.Second); got != "term\n" {
		t.Errorf("child wrote %q", got)
	}
	if c := cmd.code(); c != 3 {
		t.Errorf("exit %d, want the child's 3; output:\n%s", c, out.String())
	}
	if s := statusOf(t, store, key); s.Held {
		t.Errorf("the lease is still held after the child exited: %+v", s)
	}
}

func TestRunKill9LeaseExpires(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	cmd := holdInBackground(t, store, key, "--ttl", "1s")
	killed := time.Now()
	if err := cmd.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the lease to expire", func() bool { return !statusOf(t, store, key).Held })
	if d := time.Since(killed); d > 10*time.Second {
		t.Errorf("the lease expired %v after kill -9, TTL 1s", d)
	}
	// And the next holder can run.
	if r := lease(t, "run", "--store", store, key, "--no-wait", "--", "true"); r.code != 0 {
		t.Errorf("run after expiry: exit %d: %s", r.code, r.stderr)
	}
}

func TestRunLossStopsTheCommand(t *testing.T) {
	addr := leasetest.Env(t, "LEASE_TEST_REDIS_ADDR")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for _, tc := range []struct {
		name   string
		script string
		wrote  string
	}{
		{"stops-on-SIGTERM", `trap 'echo term > "$0/got"; exit 0' TERM; echo ready > "$0/ready"; while :; do sleep 0.1; done`, "term\n"},
		{"killed-after-grace", `trap 'echo ignored > "$0/got"' TERM; echo ready > "$0/ready"; while :; do sleep 0.1; done`, "ignored\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := fmt.Sprintf("leasecli%d:", time.Now().UnixNano())
			store := "redis://" + addr + "/?prefix=" + prefix
			key := uniqueKey(t)
			dir := t.TempDir()
			cmd, out := background(t, "run", "--store", store, key, "--ttl", "1s", "--grace", "1s", "--", "sh", "-c", tc.script, dir)
			waitFile(t, filepath.Join(dir, "ready"), 20*time.Second)
			// Take the lease away behind lease run's back: its next renewal
			// finds its token gone.
			if n, err := rdb.Del(context.Background(), prefix+"{"+key+"}").Result(); err != nil || n != 1 {
				t.Fatalf("DEL: %d, %v", n, err)
			}
			waitFor(t, 20*time.Second, "lease run to exit", func() bool { return cmd.exited() })
			if c := cmd.code(); c != 76 {
				t.Errorf("exit %d, want 76; output:\n%s", c, out.String())
			}
			if got := waitFile(t, filepath.Join(dir, "got"), time.Second); got != tc.wrote {
				t.Errorf("child wrote %q, want %q", got, tc.wrote)
			}
		})
	}
}

// storesUnderTest returns the URLs of every store available to this run.
func storesUnderTest(t *testing.T) map[string]string {
	stores := map[string]string{"file": fileStore(t)}
	n := time.Now().UnixNano()
	if v := os.Getenv("LEASE_TEST_REDIS_ADDR"); v != "" {
		stores["redis"] = fmt.Sprintf("redis://%s/?prefix=leasecli%d:", v, n)
	}
	if v := os.Getenv("LEASE_TEST_POSTGRES_DSN"); v != "" {
		sep := "?"
		if strings.Contains(v, "?") {
			sep = "&"
		}
		stores["postgres"] = fmt.Sprintf("%s%snamespace=leasecli%d", v, sep, n)
		stores["postgres-advisory"] = fmt.Sprintf("%s%smode=advisory&namespace=leasecli%d", v, sep, n)
	}
	if v := os.Getenv("LEASE_TEST_MYSQL_DSN"); v != "" {
		cfg, err := mysql.ParseDSN(v) // a go-sql-driver DSN: made a mysql:// URL
		if err != nil {
			t.Fatalf("LEASE_TEST_MYSQL_DSN: %v", err)
		}
		u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}
		stores["mysql"] = fmt.Sprintf("%s?namespace=leasecli%d", u.String(), n)
		stores["mysql-getlock"] = fmt.Sprintf("%s?mode=getlock&namespace=leasecli%d", u.String(), n)
	}
	if v := os.Getenv("LEASE_TEST_ETCD_ENDPOINTS"); v != "" {
		stores["etcd"] = fmt.Sprintf("etcd://%s/leasecli%d/", v, n)
	}
	if v := os.Getenv("LEASE_TEST_ZK_SERVERS"); v != "" {
		stores["zk"] = fmt.Sprintf("zk://%s/leasecli%d", v, n)
	}
	if v := os.Getenv("LEASE_TEST_NATS_URL"); v != "" {
		stores["nats"] = fmt.Sprintf("%s/leasecli?namespace=leasecli%d", v, n)
	}
	if os.Getenv(leasetest.RequireAllEnv) == "1" && len(stores) < 7 {
		t.Errorf("%s=1 but only these stores are configured: %v", leasetest.RequireAllEnv, stores)
	}
	return stores
}

func TestStatusJSONOnEveryStore(t *testing.T) {
	for name, store := range storesUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			key := uniqueKey(t)
			if s := statusOf(t, store, key); s.Held || s.Key != key || s.Holder != "" || s.RemainingMS != 0 {
				t.Errorf("free key: %+v", s)
			}
			holdInBackground(t, store, key, "--ttl", "5s")
			s := statusOf(t, store, key)
			// etcdlease cannot tell the remaining TTL (0: unknown).
			if !s.Held || s.Holder != "background" || s.Fence == 0 || s.RemainingMS < 0 || s.RemainingMS > 5000 ||
				(s.RemainingMS == 0 && name != "etcd") {
				t.Errorf("held key: %+v", s)
			}
			r := lease(t, "status", "--store", store, key)
			if r.code != 0 || !strings.Contains(r.stdout, "holder:    background") {
				t.Errorf("text status: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
			}
		})
	}
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestMetricsEndpoint(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	dir := t.TempDir()
	addr := freePort(t)
	cmd, out := background(t, "run", "--store", store, key, "--ttl", "2s", "--metrics-addr", addr, "--",
		"sh", "-c", `echo ready > "$0/ready"; while [ ! -e "$0/stop" ]; do sleep 0.1; done`, dir)
	waitFile(t, filepath.Join(dir, "ready"), 20*time.Second)
	time.Sleep(1500 * time.Millisecond) // two heartbeats (every TTL/3)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v\n%s", err, out.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		"lease_acquired_total 1", "lease_held 1", "lease_released_total 0",
		`lease_lost_total{reason="not_held"} 0`, "lease_heartbeat_latency_seconds_bucket",
		"lease_acquire_wait_seconds_count 1", "go_goroutines",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, "lease_renewals_total 0\n") {
		t.Error("no renewal counted after 1.5 s with a 2 s TTL")
	}
	if strings.Contains(text, key) {
		t.Error("the key appears in the metrics without --metrics-key-label")
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "lease run to exit", func() bool { return cmd.exited() })
	if c := cmd.code(); c != 0 {
		t.Errorf("exit %d:\n%s", c, out.String())
	}
}

const password = "Pa55-w0rd-never-printed"

func TestNoPasswordInAnyOutput(t *testing.T) {
	var outputs []result
	key := uniqueKey(t)
	for _, store := range []string{
		"redis://user:" + password + "@127.0.0.1:1/",                              // unreachable
		"rediss://user:" + password + "@127.0.0.1:1/?prefix=x:",                   // unreachable, TLS
		"postgres://u:" + password + "@127.0.0.1:1/db?connect_timeout=2",          // unreachable
		"postgres://u@127.0.0.1:1/db?password=" + password + "&connect_timeout=2", // password as a parameter
		"gopher://u:" + password + "@host/",                                       // unknown scheme
		"redis://u:" + password + "@[::1:bad",                                     // malformed
	} {
		for _, args := range [][]string{
			{"status", "--json", "--log-level", "debug", "--timeout", "5s", "--store", store, key},
			{"run", "--log-level", "debug", "--timeout", "2s", "--store", store, key, "--", "true"},
		} {
			r := lease(t, args...)
			if r.code == 0 {
				t.Errorf("lease %s against an unreachable store exited 0", args[0])
			}
			outputs = append(outputs, r)
		}
	}
	// A private Redis that requires the password: success and wrong-password paths.
	if srv, err := exec.LookPath("redis-server"); err == nil {
		addr := freePort(t)
		_, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command(srv, "--bind", "127.0.0.1", "--port", port, "--requirepass", password, "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		good := "redis://:" + password + "@" + addr + "/"
		waitFor(t, 10*time.Second, "the private redis-server", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		r := lease(t, "run", "--log-level", "debug", "--store", good, key, "--", "true")
		if r.code != 0 {
			t.Errorf("run with the right password: exit %d: %s", r.code, r.stderr)
		}
		outputs = append(outputs, r)
		r = lease(t, "status", "--json", "--log-level", "debug", "--store", good, key)
		if r.code != 0 || !strings.Contains(r.stdout, `"store":"redis://:xxxxx@`) {
			t.Errorf("status with the right password: exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		outputs = append(outputs, r)
		r = lease(t, "status", "--store", strings.Replace(good, password, password+"-wrong", 1), key)
		if r.code != 69 {
			t.Errorf("status with a wrong password: exit %d, want 69: %s", r.code, r.stderr)
		}
		outputs = append(outputs, r)
	} else if os.Getenv(leasetest.RequireAllEnv) == "1" {
		t.Error("redis-server not found")
	}
	for _, r := range outputs {
		for _, s := range []string{r.stdout, r.stderr} {
			if strings.Contains(s, password) || strings.Contains(s, "Pa55") {
				t.Errorf("the password appears in the output:\n%s", s)
			}
		}
	}
}

func TestDemo(t *testing.T) {
	start := time.Now()
	r := lease(t, "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "PASS") {
		t.Fatalf("lease demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"kill -9 worker-1", "SIGSTOP", "stale fence", "write rejected"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the timeline lacks %q", want)
		}
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("lease demo took %v, want under 30 s", d)
	}
}

// TestRunLostUnnoticed: the key is taken away while the command runs and the
// command exits before lease run's heartbeat notices; the release finds the
// token gone, and lease run exits 76, not the command's 0.
func TestRunLostUnnoticed(t *testing.T) {
	for _, tc := range []struct{ name, script string }{
		{"deleted", `rm -f "$0"/*; exit 0`},
		{"taken-over", `rm -f "$0"/*; "$1" run --store "file://$0" "$2" --holder thief --no-wait -- true || exit 9; exit 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "leases")
			key := uniqueKey(t)
			r := lease(t, "run", "--store", "file://"+dir, key, "--", "sh", "-c", tc.script, dir, bin, key)
			if r.code != 76 {
				t.Errorf("exit %d, want 76; stderr:\n%s", r.code, r.stderr)
			}
		})
	}
}
