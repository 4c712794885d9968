package leaseurl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/leaseurl"
)

const secret = "s3cr3t-PW"

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:" + secret + "@127.0.0.1:6379/0":                                            "redis://:xxxxx@127.0.0.1:6379/0",
		"rediss://user:" + secret + "@h:6380?prefix=a:":                                       "rediss://user:xxxxx@h:6380?prefix=a:",
		"postgres://u@h/db?sslmode=disable&password=" + secret:                                "postgres://u@h/db?password=xxxxx&sslmode=disable",
		"etcd://root:" + secret + "@h1:2379,h2:2379/app/":                                     "etcd://root:xxxxx@h1:2379,h2:2379/app/",
		"file:///var/lib/leases":                                                              "file:///var/lib/leases",
		"redis://u:" + secret + "@[::1:bad":                                                   "redis://u:xxxxx@[::1:bad",
		"host=db user=u password=" + secret + " dbname=x":                                     "host=db user=u password=xxxxx dbname=x",
		"redis://u:p%40" + secret + "@h:1":                                                    "redis://u:xxxxx@h:1",
		"zk://h:2181/chroot":                                                                  "zk://h:2181/chroot",
		"nats://u:" + secret + "@h:4222/leases":                                               "nats://u:xxxxx@h:4222/leases",
		"natss://h:4222/leases?token=" + secret:                                               "natss://h:4222/leases?token=xxxxx",
		"rediss+cluster://:" + secret + "@h1:1,h2:2?prefix=a:":                                "rediss+cluster://:xxxxx@h1:1,h2:2?prefix=a:",
		"redis+sentinel://u:" + secret + "@h1:26379,h2:26379/m/1?sentinel_password=" + secret: "redis+sentinel://u:xxxxx@h1:26379,h2:26379/m/1?sentinel_password=xxxxx",
	} {
		got := leaseurl.Redact(in)
		if got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, secret) {
			t.Errorf("Redact(%q) = %q still contains the password", in, got)
		}
	}
}

func TestOpenErrorsAreClearAndRedacted(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		url  string
		want error
		text string
	}{
		{"", lease.ErrInvalid, "empty URL"},
		{"no-scheme-" + secret, lease.ErrInvalid, "no scheme"},
		{"ftp://u:" + secret + "@h/x", leaseurl.ErrUnsupported, `"ftp"`},
		{"redis://u:" + secret + "@[::1:bad", lease.ErrInvalid, "malformed"},
		{"redis://u:" + secret + "@h:1/?bogus_option=1", lease.ErrInvalid, "bogus_option"},
		{"redis://u:" + secret + "@h:1/?mode=advisory", lease.ErrInvalid, "mode"},
		{"postgres://u:" + secret + "@127.0.0.1:1/db?mode=sideways", lease.ErrInvalid, "sideways"},
		{"file://somehost/dir", lease.ErrInvalid, "file:///"},
	} {
		s, err := leaseurl.Open(ctx, tc.url)
		if err == nil {
			_ = s.Close()
			t.Errorf("Open(%q) succeeded", leaseurl.Redact(tc.url))
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("Open(%q) = %v, want an error matching %v", leaseurl.Redact(tc.url), err, tc.want)
		}
		if !strings.Contains(err.Error(), tc.text) {
			t.Errorf("Open(%q) = %v, want it to mention %q", leaseurl.Redact(tc.url), err, tc.text)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Open error contains the password: %v", err)
		}
	}
}

func TestSchemes(t *testing.T) {
	got := strings.Join(leaseurl.Schemes(), " ")
	for _, s := range []string{"etcd", "etcds", "file", "k8s", "mem", "mysql", "nats", "natss", "postgres", "postgresql", "redis", "rediss", "zk",
		"redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"} {
		if !strings.Contains(" "+got+" ", " "+s+" ") {
			t.Errorf("scheme %s not registered (have %s)", s, got)
		}
	}
}

// TestDefaultFileDir: the default directory's order: the XDG state
// directory or the home directory (kept across reboots), then
// $XDG_RUNTIME_DIR (private, without a home), and only then
// /tmp/leasekit-<uid>, which another user could create first: the file
// store then refuses it instead of using it.
func TestDefaultFileDir(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/4242")
	t.Setenv("XDG_STATE_HOME", "/tmp/state-test")
	if got := leaseurl.DefaultFileDir(); got != "/tmp/state-test/leasekit" {
		t.Errorf("with XDG_STATE_HOME: %q", got)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/someone")
	if got := leaseurl.DefaultFileDir(); got != "/home/someone/.local/state/leasekit" {
		t.Errorf("with HOME and XDG_RUNTIME_DIR: %q, want the home directory's", got)
	}
	if got := leaseurl.DefaultURL(); got != "file:///home/someone/.local/state/leasekit" {
		t.Errorf("DefaultURL() = %q", got)
	}
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	if got := leaseurl.DefaultFileDir(); got != "/run/user/4242/leasekit" {
		t.Errorf("without HOME, with XDG_RUNTIME_DIR: %q, want /run/user/4242/leasekit", got)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	want := filepath.Join(tmp, fmt.Sprintf("leasekit-%d", os.Getuid()))
	for _, runtime := range []string{"", "relative/run"} {
		t.Setenv("XDG_RUNTIME_DIR", runtime)
		if got := leaseurl.DefaultFileDir(); got != want {
			t.Errorf("without HOME, XDG_RUNTIME_DIR=%q: %q, want %q", runtime, got, want)
		}
	}
	// The last resort, created by someone else for everyone to write to, is
	// refused rather than used.
	if err := os.Mkdir(want, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(want, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s, err := leaseurl.Open(ctx, "file://"); !errors.Is(err, filelease.ErrUnsafeDir) {
		if s != nil {
			_ = s.Close()
		}
		t.Errorf("Open(file://) on a world-writable %s: %v; want filelease.ErrUnsafeDir", want, err)
	}
}

// shareKeys checks that two stores opened from url share keys, like two
// processes, and that a released key is free again.
func shareKeys(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := leaseurl.Open(ctx, url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer a.Close()
	b, err := leaseurl.Open(ctx, url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer b.Close()
	key := fmt.Sprintf("leaseurl-test-%d", time.Now().UnixNano())
	// A long TTL so a busy host's heartbeat keeps it, within the store's limit.
	ttl := 30 * time.Second
	if m := a.Caps().MaxTTL; m > 0 && m < ttl {
		ttl = m
	}
	ca, err := lease.New(a, lease.WithTTL(ttl), lease.WithHolder("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	cb, err := lease.New(b, lease.WithTTL(ttl), lease.WithHolder("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	la, err := ca.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	var held *lease.HeldError
	if _, err := cb.TryAcquire(ctx, key); !errors.As(err, &held) || held.Holder != "a" {
		t.Fatalf("second store's TryAcquire = %v, want held by a", err)
	}
	info, err := cb.Inspect(ctx, key)
	if err != nil || !info.Held || info.Holder != "a" || info.Fence != la.Fence() {
		t.Fatalf("Inspect = %+v, %v; want held by a with fence %d", info, err, la.Fence())
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := cb.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	if lb.Fence() <= la.Fence() {
		t.Errorf("fence %d after %d", lb.Fence(), la.Fence())
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "made", "by", "open")
	shareKeys(t, "file://"+dir)
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the directory was not created: %v", err)
	}
}

func TestMem(t *testing.T) { shareKeys(t, "mem://"+t.Name()) }

func TestRedis(t *testing.T) {
	addr := leasetest.Env(t, "LEASE_TEST_REDIS_ADDR")
	url := fmt.Sprintf("redis://%s/?prefix=leaseurl-%d:", addr, time.Now().UnixNano())
	shareKeys(t, url)

	s, err := leaseurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	// The wrapper keeps the optional interfaces of redislease.
	if _, ok := s.(driver.BatchRenewer); !ok {
		t.Error("not a BatchRenewer")
	}
	if _, ok := s.(driver.Notifier); !ok {
		t.Error("not a Notifier")
	}
	if _, err := s.Inspect(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Close closed the go-redis client Open made.
	if _, err := s.Inspect(context.Background(), "k"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Inspect after Close = %v, want a closed-client error", err)
	}
}

func TestRedisWrongPasswordIsRedacted(t *testing.T) {
	addr := leasetest.Env(t, "LEASE_TEST_REDIS_ADDR")
	s, err := leaseurl.Open(context.Background(), "redis://nobody:"+secret+"@"+addr+"/")
	if err != nil {
		t.Fatalf("Open is lazy for Redis: %v", err)
	}
	defer s.Close()
	_, err = s.Inspect(context.Background(), "k")
	if err == nil {
		t.Fatal("Inspect with a wrong user and password succeeded")
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error contains the password: %v", err)
	}
}

func TestPostgres(t *testing.T) {
	dsn := leasetest.Env(t, "LEASE_TEST_POSTGRES_DSN")
	for _, mode := range []string{"table", "advisory"} {
		t.Run(mode, func(t *testing.T) {
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			shareKeys(t, fmt.Sprintf("%s%smode=%s&namespace=leaseurl-%d", dsn, sep, mode, time.Now().UnixNano()))
		})
	}
}

func TestEtcd(t *testing.T) {
	eps := leasetest.Env(t, "LEASE_TEST_ETCD_ENDPOINTS")
	shareKeys(t, fmt.Sprintf("etcd://%s/leaseurl-%d/", eps, time.Now().UnixNano()))
}

func TestNATS(t *testing.T) {
	u := leasetest.Env(t, "LEASE_TEST_NATS_URL")
	shareKeys(t, fmt.Sprintf("%s/leaseurl?namespace=t%d", u, time.Now().UnixNano()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, bad := range []string{u + "/leaseurl?namespace=a.b", u + "/bad.bucket", u + "/leaseurl?prefix=x", u + "/leaseurl?other=1"} {
		if s, err := leaseurl.Open(ctx, bad); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Open(%q) = %v, %v; want ErrInvalid", bad, s, err)
		}
	}
}

func TestZooKeeper(t *testing.T) {
	servers := leasetest.Env(t, "LEASE_TEST_ZK_SERVERS")
	shareKeys(t, fmt.Sprintf("zk://%s/leaseurl-%d", servers, time.Now().UnixNano()))
}

// TestRedactAmbiguousUserinfo: unescaped '@', '/', '?' or '#' in a password
// make URL parsers end the user information early; Redact must still hide
// the password (it may hide more).
func TestRedactAmbiguousUserinfo(t *testing.T) {
	for _, tc := range []struct{ in, secret string }{
		{"redis://u:pa#ss@h:1", "pa#ss"},
		{"redis://u:p@ss@[::1:bad", "p@ss"},
		{"rediss://user:p@ss:w/rd#?@127.0.0.1:6380", "p@ss:w/rd#?"},
		{"postgres://u:a/b?c@db:5432/x?sslmode=disable", "a/b?c"},
		// Not a scheme before "://": parsers read the rest as a fragment
		// or a path, not as user information.
		{"A:#://0:s3cr3t@h?0", "s3cr3t"},
		{"redis:/x#://u:s3cr3t@h", "s3cr3t"},
		{"re dis://u:s3cr3t@h", "s3cr3t"},
	} {
		out := leaseurl.Redact(tc.in)
		if strings.Contains(out, tc.secret) || !strings.Contains(out, leaseurl.Redacted) {
			t.Errorf("Redact(%q) = %q: the password %q shows", tc.in, out, tc.secret)
		}
	}
	// Unambiguous URLs keep their host and query.
	if got, want := leaseurl.Redact("redis://u:pw@h:1/0?prefix=a:"), "redis://u:xxxxx@h:1/0?prefix=a:"; got != want {
		t.Errorf("Redact = %q, want %q", got, want)
	}
}
