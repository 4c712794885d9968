// Package faketime runs private test servers under libfaketime (Debian
// package faketime) with a wall clock the test moves while they run: the
// server reads its offset from a file on every clock call
// (FAKETIME_TIMESTAMP_FILE with FAKETIME_NO_CACHE=1; once a second with
// Cached), and Step rewrites the file. Only the server's realtime clock
// moves (CLOCK_REALTIME, gettimeofday, time): FAKETIME_DONT_FAKE_MONOTONIC=1
// leaves CLOCK_MONOTONIC alone, as an NTP step or a drifting oscillator
// would (Monotonic moves it too). The machine's own clock is never touched.
//
// Programs linked with jemalloc (Debian's redis-server) hang at start under
// libfaketime: jemalloc's initialization reads the clock, libfaketime's
// initialization allocates, and each waits for the other. EnvLibcMalloc
// preloads, before libfaketime, a small shim (built with cc on first use)
// that routes malloc and its family to glibc's allocator, so jemalloc never
// initializes.
package faketime

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/lease/leasetest"
)

// LibEnv names the libfaketime library to preload; by default the first of
// /usr/lib/*/faketime/libfaketimeMT.so.1, the thread-safe build (the JVM and
// Redis run threads).
const LibEnv = "LEASE_TEST_FAKETIME_LIB"

// Lib returns the path of libfaketimeMT.so.1, or "" if there is none.
func Lib() string {
	if p := os.Getenv(LibEnv); p != "" {
		return p
	}
	ps, _ := filepath.Glob("/usr/lib/*/faketime/libfaketimeMT.so.1")
	if len(ps) == 0 {
		return ""
	}
	return ps[0]
}

// Clock is the wall clock of the servers started with its Env: real time
// plus an offset the test steps.
type Clock struct {
	lib  string
	dir  string
	path string

	mu     sync.Mutex
	offset time.Duration
}

// New returns a clock at offset 0, its control file in a new directory that
// any user can read (a PostgreSQL server runs as the postgres user),
// removed at cleanup. Without libfaketime the test is skipped, or fails
// under LEASE_TEST_REQUIRE_ALL=1.
func New(t testing.TB) *Clock {
	t.Helper()
	lib := Lib()
	if lib == "" {
		if os.Getenv(leasetest.RequireAllEnv) == "1" {
			t.Fatalf("no libfaketime (Debian package faketime, or %s) and %s=1: this test must run", LibEnv, leasetest.RequireAllEnv)
		}
		t.Skipf("no libfaketime: install the Debian package faketime or set %s", LibEnv)
	}
	dir, err := os.MkdirTemp("", "leasekit-faketime-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.RemoveAll(dir)
		sweepShm()
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Clock{lib: lib, dir: dir, path: filepath.Join(dir, "offset")}
	if err := c.write(0); err != nil {
		t.Fatal(err)
	}
	return c
}

// Env returns the environment variables that put a process on this clock.
func (c *Clock) Env(opts ...Option) []string {
	env := []string{"LD_PRELOAD=" + c.lib, "FAKETIME_TIMESTAMP_FILE=" + c.path, "FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1"}
	for _, o := range opts {
		env = o(env)
	}
	return env
}

// An Option changes the environment Env returns.
type Option func(env []string) []string

// Cached makes the process re-read the offset at most once a second
// (FAKETIME_CACHE_DURATION=1) instead of at every clock call: a step then
// reaches it within a second. A JVM reads the clock so often that reading
// the file each time slows it down several times on a busy machine.
func Cached() Option {
	return func(env []string) []string {
		return replace(env, "FAKETIME_NO_CACHE=", "FAKETIME_CACHE_DURATION=1")
	}
}

// Monotonic moves the process's monotonic clocks (CLOCK_MONOTONIC and the
// like) with its wall clock: a step moves both, as when a paused virtual
// machine resumes. At start the monotonic clock then reads as the wall
// clock does.
func Monotonic() Option {
	return func(env []string) []string {
		return replace(env, "FAKETIME_DONT_FAKE_MONOTONIC=", "FAKETIME_DONT_FAKE_MONOTONIC=0")
	}
}

// replace replaces the variable of env that starts with prefix by v.
func replace(env []string, prefix, v string) []string {
	for i, e := range env {
		if strings.HasPrefix(e, prefix) {
			env[i] = v
		}
	}
	return env
}

// EnvLibcMalloc is Env for a program linked with jemalloc: it preloads the
// shim that routes malloc and its family to glibc before libfaketime. The
// program then runs on glibc's allocator (its jemalloc statistics read as
// absent).
func (c *Clock) EnvLibcMalloc(t testing.TB) []string {
	t.Helper()
	shim := filepath.Join(c.dir, "libcmalloc.so")
	if _, err := os.Stat(shim); err != nil {
		src := filepath.Join(c.dir, "libcmalloc.c")
		if err := os.WriteFile(src, []byte(shimSource), 0o644); err != nil {
			t.Fatal(err)
		}
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "cc"
		}
		out, err := exec.Command(cc, "-O2", "-shared", "-fPIC", "-o", shim, src, "-ldl").CombinedOutput()
		if err != nil {
			t.Fatalf("building the libc malloc shim with %s: %v\n%s", cc, err, out)
		}
	}
	env := c.Env()
	env[0] = "LD_PRELOAD=" + shim + " " + c.lib
	return env
}

// Offset returns how far the clock is from real time now.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// Step moves the clock by d (back when d < 0) at once: the servers see it
// at their next clock call.
func (c *Clock) Step(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.write(c.offset + d); err != nil {
		return err
	}
	c.offset += d
	return nil
}

// write replaces the control file atomically (a server never reads half of
// it): libfaketime's relative offset, in seconds with a sign.
func (c *Clock) write(off time.Duration) error {
	s := strconv.FormatFloat(off.Seconds(), 'f', 6, 64)
	if !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s+"\n"), 0o644); err != nil {
		return fmt.Errorf("faketime: %w", err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		return fmt.Errorf("faketime: %w", err)
	}
	return nil
}

// sweepShm removes the shared memory segments and semaphores that
// libfaketime creates for each process tree it starts in and leaves behind
// ("/dev/shm/faketime_shm_PID", "sem.faketime_sem_PID"), those of process
// trees whose first process has exited.
func sweepShm() {
	shms, _ := filepath.Glob("/dev/shm/faketime_shm_*")
	for _, p := range shms {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "faketime_shm_"))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		_ = os.Remove(p)
		_ = os.Remove(filepath.Join("/dev/shm", "sem.faketime_sem_"+strconv.Itoa(pid)))
	}
}

// shimSource routes the malloc family to glibc (__libc_*), and answers
// jemalloc's own entry points (mallctl, nallocx, malloc_stats_print) as a
// jemalloc without statistics would.
const shimSource = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
void *calloc(size_t n, size_t m) { return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { return __libc_memalign(a, n); }
void *valloc(size_t n) { return __libc_valloc(n); }
void *pvalloc(size_t n) { return __libc_pvalloc(n); }
int posix_memalign(void **r, size_t a, size_t n) {
	if (a % sizeof(void *) != 0 || (a & (a - 1)) != 0) return EINVAL;
	void *p = __libc_memalign(a, n);
	if (p == NULL && n != 0) return ENOMEM;
	*r = p;
	return 0;
}
static size_t (*libc_usable)(void *);
size_t malloc_usable_size(void *p) {
	if (libc_usable == NULL) {
		void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
		libc_usable = (size_t (*)(void *))dlsym(h, "malloc_usable_size");
	}
	return libc_usable(p);
}
int mallctl(const char *name, void *o, size_t *ol, void *n, size_t nl) {
	(void)name; (void)o; (void)ol; (void)n; (void)nl;
	return ENOENT;
}
size_t nallocx(size_t n, int flags) { (void)flags; return n; }
void malloc_stats_print(void (*cb)(void *, const char *), void *op, const char *opts) {
	(void)cb; (void)op; (void)opts;
}
`
