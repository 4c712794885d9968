// The exact one-line error of each failure a new user meets first: an
// unreachable Redis or PostgreSQL, --no-wait on every store, a missing
// table with migrate=false, an unknown scheme; passwords redacted.

package main_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/leaseurl"
)

// wantStderr checks that r failed with code and printed exactly want.
func wantStderr(t *testing.T, what string, r result, code int, want string) {
	t.Helper()
	if r.code != code || r.stderr != want+"\n" {
		t.Errorf("%s: exit %d, want %d; stderr:\n%s\nwant exactly:\n%s", what, r.code, code, r.stderr, want)
	}
}

func TestErrorMessages(t *testing.T) {
	const pw = "Pa55-w0rd-never-printed"
	key := "errors:k"
	redisURL := "redis://u:" + pw + "@127.0.0.1:1/"
	wantStderr(t, "run, unreachable Redis", lease(t, "run", "--store", redisURL, key, "--", "true"), 69,
		`lease run: acquire "errors:k": store redis://u:xxxxx@127.0.0.1:1/: dial tcp 127.0.0.1:1: connect: connection refused`)
	wantStderr(t, "status, unreachable Redis", lease(t, "status", "--store", redisURL, key), 69,
		`lease status: inspect "errors:k": store redis://u:xxxxx@127.0.0.1:1/: dial tcp 127.0.0.1:1: connect: connection refused`)
	pgURL := "postgres://u:" + pw + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=5"
	wantStderr(t, "run, unreachable PostgreSQL", lease(t, "run", "--store", pgURL, key, "--", "true"), 69,
		`lease run: leaseurl: open postgres store "postgres://u:xxxxx@127.0.0.1:1/db?sslmode=disable&connect_timeout=5": connect: `+
			"failed to connect to `user=u database=db`: 127.0.0.1:1 (127.0.0.1): dial error: dial tcp 127.0.0.1:1: connect: connection refused")
	r := lease(t, "run", "--store", "gopher://x", key, "--", "true")
	if r.code != 64 || !strings.HasPrefix(r.stderr, `lease run: leaseurl: unsupported store URL scheme "gopher" in "gopher://x" (want one of `) ||
		strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("unknown scheme: exit %d; stderr:\n%s", r.code, r.stderr)
	}
}

// TestRedisLogIsDebug: go-redis's own log lines (its pool's retries) are
// not printed at the default level, and are slog lines at debug level.
func TestRedisLogIsDebug(t *testing.T) {
	r := lease(t, "run", "--log-level", "debug", "--store", "redis://127.0.0.1:1/", "k", "--", "true")
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(l, "time=") && !strings.HasPrefix(l, "lease run: ") {
			t.Errorf("a line that is not the command's: %q", l)
		}
	}
	if !strings.Contains(r.stderr, "level=DEBUG") || !strings.Contains(r.stderr, "component=go-redis") {
		t.Errorf("go-redis's log is not at debug level:\n%s", r.stderr)
	}
}

func TestNoWaitMessageOnEveryStore(t *testing.T) {
	for name, store := range storesUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			key := uniqueKey(t)
			holdInBackground(t, store, key)
			r := lease(t, "run", "--store", store, key, "--no-wait", "--", "true")
			// Stores that cannot tell the time left (etcd) leave it out.
			re := regexp.MustCompile(`^lease run: not acquired \(--no-wait\): lease: key ` + regexp.QuoteMeta(fmt.Sprintf("%q", key)) +
				` is held by "background" \(fence [1-9][0-9]*\)(, [0-9.]+m?s left)?\n$`)
			if r.code != 75 || !re.MatchString(r.stderr) {
				t.Errorf("exit %d, want 75; stderr:\n%s", r.code, r.stderr)
			}
		})
	}
}

func TestPostgresMissingTableHint(t *testing.T) {
	dsn := leasetest.Env(t, "LEASE_TEST_POSTGRES_DSN")
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	table := fmt.Sprintf("leasecli_missing_%d", time.Now().UnixNano())
	store := dsn + sep + "migrate=false&table=" + table
	wantStderr(t, "run, migrate=false", lease(t, "run", "--store", store, "k", "--", "true"), 69,
		fmt.Sprintf(`lease run: leaseurl: open postgres store %q: table "%s" does not exist and migrate=false: `+
			"drop migrate=false to create it, or call pglease's Store.Migrate", leaseurl.Redact(store), table))
}
