// Security: Redis over TLS with client certificates (a private server with
// a generated CA), and keys and prefixes full of Lua- and Redis-significant
// characters, which must stay inert data.

package redislease_test

import (
	"crypto/tls"
	"errors"
	"fmt"
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
	prefix := uniquePrefix(t)
	// A bystander key of the same namespace and one outside it must survive.
	canary := "canary:" + randHex(t, 8)
	if err := c.Set(ctx, canary, "alive", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Del(ctx, canary) })
	s := storeWithPrefix(t, c, prefix)
	other := req("bystander", token(t), "h", time.Minute)
	if _, err := s.Acquire(ctx, other); err != nil {
		t.Fatal(err)
	}
	for _, k := range injectionKeys {
		holder := `h" } ]] redis.call('FLUSHALL') --`
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
	// Prefixes with Lua-significant characters are data too; '{' and '}' are refused.
	for _, p := range []string{`p"]]--:`, `p'); --:`, "p*?[]:"} {
		ps := storeWithPrefix(t, c, p+randHex(t, 4)+":")
		r := req("k", token(t), "h", time.Minute)
		if _, err := ps.Acquire(ctx, r); err != nil {
			t.Fatalf("Acquire with prefix %q: %v", p, err)
		}
		if err := ps.Release(ctx, r); err != nil {
			t.Fatalf("Release with prefix %q: %v", p, err)
		}
	}
	if _, err := redislease.New(c, redislease.WithPrefix("a{b}:")); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("WithPrefix with braces = %v, want ErrInvalid", err)
	}
}

// The lease string is token NUL fence NUL holder: a holder name with NUL
// bytes, newlines or digits after a NUL is the rest of the string and reads
// back whole; a token with a NUL byte is refused (ErrInvalid) before any
// round trip and leaves the lease it aimed at alone.
func TestLeaseStringFields(t *testing.T) {
	c := sharedClient(t)
	ctx := testCtx(t, 30*time.Second)
	s := storeWithPrefix(t, c, uniquePrefix(t))
	for i, holder := range []string{"", "h\x00123\x00x", "\x00", "line\nbreak\x00", "7\x008"} {
		k := fmt.Sprintf("k%d", i)
		r := req(k, token(t), holder, time.Minute)
		g, err := s.Acquire(ctx, r)
		if err != nil {
			t.Fatalf("Acquire(holder %q): %v", holder, err)
		}
		info, err := s.Inspect(ctx, k)
		if err != nil || !info.Held || info.Holder != holder || info.Fence != g.Fence {
			t.Fatalf("Inspect(holder %q) = %+v, %v; want that holder and fence %d", holder, info, err, g.Fence)
		}
		if err := s.Renew(ctx, r); err != nil {
			t.Fatalf("Renew(holder %q): %v", holder, err)
		}
		if err := s.Release(ctx, r); err != nil {
			t.Fatalf("Release(holder %q): %v", holder, err)
		}
	}

	held := req("held", token(t), "h", time.Minute)
	g, err := s.Acquire(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	// A token that extends the holder's by a NUL byte and its fence would
	// match the lease string's start if NUL were allowed.
	for _, tok := range []string{held.Token + "\x00", held.Token + "\x00" + strconv.FormatUint(g.Fence, 10), "\x00"} {
		bad := req("held", tok, "intruder", time.Minute)
		if _, err := s.Acquire(ctx, bad); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Acquire(token %q) = %v, want ErrInvalid", tok, err)
		}
		if err := s.Renew(ctx, bad); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Renew(token %q) = %v, want ErrInvalid", tok, err)
		}
		if err := s.Release(ctx, bad); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Release(token %q) = %v, want ErrInvalid", tok, err)
		}
		if errs := s.RenewMany(ctx, []lease.Request{bad}); !errors.Is(errs[0], lease.ErrInvalid) {
			t.Errorf("RenewMany(token %q) = %v, want ErrInvalid", tok, errs[0])
		}
	}
	info, err := s.Inspect(ctx, "held")
	if err != nil || !info.Held || info.Holder != "h" || info.Fence != g.Fence {
		t.Fatalf("after the refused calls, Inspect = %+v, %v; want still held by h", info, err)
	}
	if err := s.Renew(ctx, held); err != nil {
		t.Fatalf("holder's Renew after the refused calls: %v", err)
	}
}

// TestKeyWithNULRefused: the Store itself (not only the Client) refuses a key
// with a NUL byte, before any request: announcements separate the key from
// the next waiter's token with NUL, so a release of "k\x00<token>" would
// wake that waiter of key k as if k had been released.
func TestKeyWithNULRefused(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 10*time.Second)
	for _, key := range []string{"k\x00" + token(t), "\x00", "k\x00"} {
		r := req(key, token(t), "h", time.Second)
		if _, err := s.Acquire(ctx, r); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Acquire(%q) = %v, want ErrInvalid", key, err)
		}
		if err := s.Renew(ctx, r); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Renew(%q) = %v, want ErrInvalid", key, err)
		}
		if err := s.Release(ctx, r); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Release(%q) = %v, want ErrInvalid", key, err)
		}
		if err := s.RenewMany(ctx, []lease.Request{r})[0]; !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("RenewMany(%q) = %v, want ErrInvalid", key, err)
		}
		if _, err := s.Inspect(ctx, key); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Inspect(%q) = %v, want ErrInvalid", key, err)
		}
	}
	if n, err := c.Keys(ctx, escapeGlob(s.Prefix())+"*").Result(); err != nil || len(n) != 0 {
		t.Errorf("keys under the store's prefix: %v, %v; want none", n, err)
	}
}
