// Security: Redis over TLS with client certificates (a private server with
// a generated CA), and keys and prefixes full of Lua- and Redis-significant
// characters, which must stay inert data.

package redislease_test

import (
	"crypto/tls"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/testcert"
	"github.com/leasekit/lease/redislease"
	"github.com/redis/go-redis/v9"
)

func TestTLSWithClientCertificates(t *testing.T) {
	t.Parallel() // private servers; after the conformance suite, whose leak check sees the whole process
	certs := testcert.New(t, t.TempDir(), "leasekit-client")
	tlsPort := freePorts(t, 1)[0]
	startRedis(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", certs.ServerCert,
		"--tls-key-file", certs.ServerKey, "--tls-ca-cert-file", certs.CAFile, "--tls-auth-clients", "yes")
	addr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	ctx := testCtx(t, 30*time.Second)

	// Without TLS, or with TLS but no client certificate, nothing works.
	for name, opt := range map[string]*redis.Options{
		"plain text":               {Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second},
		"no client certificate":    {Addr: addr, MaxRetries: -1, TLSConfig: certs.ClientTLS(false)},
		"untrusted server (no CA)": {Addr: addr, MaxRetries: -1, TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}},
	} {
		c := redis.NewClient(opt)
		s := newStore(t, c)
		_, err := s.Acquire(ctx, req("tls", token(t), "h", time.Second))
		_ = c.Close()
		if err == nil || errors.Is(err, lease.ErrHeld) {
			t.Errorf("%s: Acquire = %v, want a connection error", name, err)
		}
	}

	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: certs.ClientTLS(true)})
	t.Cleanup(func() { _ = c.Close() })
	s := newStore(t, c)
	r := req("tls", token(t), "h", 5*time.Second)
	g, err := s.Acquire(ctx, r)
	if err != nil {
		t.Fatalf("Acquire over TLS: %v", err)
	}
	if err := s.Renew(ctx, r); err != nil {
		t.Fatalf("Renew over TLS: %v", err)
	}
	info, err := s.Inspect(ctx, r.Key)
	if err != nil || !info.Held || info.Fence != g.Fence {
		t.Fatalf("Inspect over TLS = %+v, %v; want held with fence %d", info, err, g.Fence)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatalf("Release over TLS: %v", err)
	}
}

// injectionKeys are keys that would do harm if a store built scripts or
// commands from them instead of passing them as data.
var injectionKeys = []string{
	`"]]; redis.call('FLUSHALL'); --`,
	`'); DROP TABLE leasekit_leases; --`,
	`]==] redis.call("DEL", KEYS[1]) --[==[`,
	"{other}", "}{", "%7B", "*", "?", "[a-z]", "lease:*", "\\", "\n\r\t", "\x01\x7f",
	"ключ 🔒", "../../x",
}

func TestInjectionKeysAreInert(t *testing.T) {
	c := sharedClient(t)
	ctx := testCtx(t, 30*time.Second)
	// A bystander key of the same namespace and one outside it must survive.
	canary := "canary:" + randHex(t, 8)
	if err := c.Set(ctx, canary, "alive", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Del(ctx, canary) })
	s := newStore(t, c)
	prefix := s.Prefix()
	other := req("bystander", token(t), "h", time.Minute)
	if _, err := s.Acquire(ctx, other); err != nil {
		t.Fatal(err)
	}
	for _, k := range injectionKeys {
		holder := "h\" } ]] redis.call('FLUSHALL') --\x00 1 \x00" // NUL bytes too: the holder is the lease string's tail
		r := req(k, token(t), holder, time.Minute)
		g, err := s.Acquire(ctx, r)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", k, err)
		}
		if _, err := s.Acquire(ctx, req(k, token(t), "intruder", time.Minute)); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("second Acquire(%q) = %v, want ErrHeld", k, err)
		}
		info, err := s.Inspect(ctx, k)
		if err != nil || !info.Held || info.Holder != holder || info.Fence != g.Fence || info.Key != k {
			t.Fatalf("Inspect(%q) = %+v, %v; want held by %q with fence %d", k, info, err, holder, g.Fence)
		}
		if n, err := c.Exists(ctx, leaseKey(prefix, k)).Result(); err != nil || n != 1 {
			t.Fatalf("key %q not stored at its escaped name %q: %d, %v", k, leaseKey(prefix, k), n, err)
		}
		if err := s.Release(ctx, r); err != nil {
			t.Fatalf("Release(%q): %v", k, err)
		}
	}
	if v, err := c.Get(ctx, canary).Result(); err != nil || v != "alive" {
		t.Fatalf("canary key outside the namespace = %q, %v; the server was tampered with", v, err)
	}
	if info, err := s.Inspect(ctx, "bystander"); err != nil || !info.Held {
		t.Fatalf("bystander lease = %+v, %v; want still held", info, err)
	}
	// Prefixes with braces would break the hash tag.
	if _, err := redislease.New(c, redislease.WithPrefix("a{b}:")); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("WithPrefix with braces = %v, want ErrInvalid", err)
	}
}

// TestKeyWithNULRefused: the Store itself (not only the Client) refuses a key
// with a NUL byte: announcements separate the key from the next waiter's
// token with NUL, so a release of "k\x00<token>" would wake that waiter of k.
func TestKeyWithNULRefused(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 10*time.Second)
	for _, key := range []string{"k\x00" + token(t), "\x00", "k\x00"} {
		if _, err := s.Acquire(ctx, req(key, token(t), "h", time.Second)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Acquire(%q) = %v, want ErrInvalid", key, err)
		}
	}
	if n, err := c.Keys(ctx, s.Prefix()+"*").Result(); err != nil || len(n) != 0 {
		t.Errorf("keys under the store's prefix: %v, %v; want none", n, err)
	}
}
