// Namespaces: a store's keys never alias the keys of a nested namespace.

package etcdlease_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/etcdlease"
	"github.com/leasekit/lease/leaseurl"
)

// TestNamespacesDoNotAlias: the namespace "app" with key "sub/x" and the
// namespace "app/sub" with key "x" are different leases (issue #28, item 9).
// Before the key was escaped into one path segment under a prefix ending in
// "/", both were the etcd key /app/sub/x: holding one held the other.
func TestNamespacesDoNotAlias(t *testing.T) {
	eps := endpoints(t)
	base := "/leasekit-test/" + randHex(6)
	t.Run("leaseurl", func(t *testing.T) {
		open := func(path string) driver.Store {
			s, err := leaseurl.Open(testCtx(t, 10*time.Second), fmt.Sprintf("etcd://%s%s", eps[0], path))
			if err != nil {
				t.Fatalf("leaseurl.Open(%s): %v", path, err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
		noAlias(t, open(base+"/url/app"), open(base+"/url/app/sub"))
	})
	t.Run("WithPrefix", func(t *testing.T) {
		cli := newCli(t, eps)
		noAlias(t, newStore(t, cli, base+"/opt/app/"), newStore(t, cli, base+"/opt/app/sub/"))
	})
	t.Run("WithPrefixNoSlash", func(t *testing.T) {
		cli := newCli(t, eps)
		app, sub := newStore(t, cli, base+"/bare/app"), newStore(t, cli, base+"/bare/app/sub")
		if app.Prefix() != base+"/bare/app/" {
			t.Errorf("Prefix() = %q, want a trailing /", app.Prefix())
		}
		noAlias(t, app, sub)
	})
	t.Run("EscapeCharacter", func(t *testing.T) {
		// "a/b" and "a%2Fb" (the escaped form of "a/b") are two keys.
		s := newStore(t, newCli(t, eps), base+"/esc/")
		ctx := testCtx(t, 30*time.Second)
		for _, k := range []string{"a/b", "a%2Fb", "a%252Fb"} {
			r := driver.Request{Key: k, Token: randHex(16), Holder: k, TTL: suiteTTL * 5}
			if _, err := s.Acquire(ctx, r); err != nil {
				t.Fatalf("Acquire(%q): %v", k, err)
			}
			t.Cleanup(func() { _ = s.Release(testCtx(t, 10*time.Second), r) })
		}
		for _, k := range []string{"a/b", "a%2Fb", "a%252Fb"} {
			if info, err := s.Inspect(ctx, k); err != nil || info.Holder != k {
				t.Errorf("Inspect(%q) = %+v, %v; want holder %q", k, info, err, k)
			}
		}
	})
	t.Run("NULInPrefix", func(t *testing.T) {
		if _, err := etcdlease.New(newCli(t, eps), etcdlease.WithPrefix("/a\x00q/")); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("New(prefix with NUL) = %v, want lease.ErrInvalid", err)
		}
	})
}

// noAlias holds "sub/x" in app, queues a waiter behind it, and shows that
// "x" in sub (the nested namespace app/sub) is free, can be held at the same
// time with its own fence, and that app's subscription announces none of
// sub's releases.
func noAlias(t *testing.T, app, sub driver.Store) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	ttl := suiteTTL * 5
	req := func(key, holder string) driver.Request {
		return driver.Request{Key: key, Token: randHex(16), Holder: holder, TTL: ttl}
	}
	a, w, b, y := req("sub/x", "app"), req("sub/x", "app-waiter"), req("x", "sub"), req("y", "app")
	ga, err := app.Acquire(ctx, a)
	if err != nil {
		t.Fatalf("app: Acquire(sub/x): %v", err)
	}
	t.Cleanup(func() { _ = app.Release(testCtx(t, 10*time.Second), a) })
	w.Queue = true
	var held *lease.HeldError
	if _, err := app.Acquire(ctx, w); !errors.As(err, &held) {
		t.Fatalf("app: Acquire(sub/x) by a waiter = %v, want a HeldError", err)
	}
	t.Cleanup(func() { _ = app.Release(testCtx(t, 10*time.Second), w) })

	if info, err := sub.Inspect(ctx, "x"); err != nil || info.Holder != "" {
		t.Errorf("sub: Inspect(x) = %+v, %v; want free (app's sub/x is another lease)", info, err)
	}
	gb, err := sub.Acquire(ctx, b)
	if err != nil {
		t.Fatalf("sub: Acquire(x) while app holds sub/x: %v (the namespaces alias)", err)
	}
	t.Cleanup(func() { _ = sub.Release(testCtx(t, 10*time.Second), b) })
	if ga.Fence == gb.Fence {
		t.Errorf("both leases have fence %d", ga.Fence)
	}
	for _, c := range []struct {
		s     driver.Store
		r     driver.Request
		fence uint64
	}{{app, a, ga.Fence}, {sub, b, gb.Fence}} {
		if err := c.s.Renew(ctx, c.r); err != nil {
			t.Errorf("Renew(%s): %v", c.r.Key, err)
		}
		if info, err := c.s.Inspect(ctx, c.r.Key); err != nil || info.Holder != c.r.Holder || info.Fence != c.fence {
			t.Errorf("Inspect(%s) = %+v, %v; want holder %q fence %d", c.r.Key, info, err, c.r.Holder, c.fence)
		}
	}

	// app's subscription (its watch covers the nested namespace's etcd
	// keys) must not announce sub's release of x as a release of sub/x.
	subs, err := app.(driver.Notifier).Subscribe(ctx)
	if err != nil {
		t.Fatalf("app: Subscribe: %v", err)
	}
	defer subs.Close()
	if _, err := app.Acquire(ctx, y); err != nil {
		t.Fatalf("app: Acquire(y): %v", err)
	}
	if err := sub.Release(ctx, b); err != nil {
		t.Fatalf("sub: Release(x): %v", err)
	}
	if err := app.Release(ctx, y); err != nil {
		t.Fatalf("app: Release(y): %v", err)
	}
	if a, err := subs.Next(ctx); err != nil || a.Key != "y" {
		t.Errorf("app's first announcement = %q, %v; want y (sub's release of x is not app's)", a.Key, err)
	}
	if info, err := app.Inspect(ctx, "sub/x"); err != nil || info.Holder != "app" || info.Fence != ga.Fence {
		t.Errorf("app: Inspect(sub/x) after sub released x = %+v, %v; want still held by app", info, err)
	}
	// The waiter queued on app's sub/x is still queued there: releasing
	// sub/x hands it over or frees it for that waiter, not for a newcomer.
	if err := app.Release(ctx, a); err != nil {
		t.Fatalf("app: Release(sub/x): %v", err)
	}
	if _, err := app.Acquire(ctx, req("sub/x", "newcomer")); !errors.As(err, &held) {
		t.Errorf("app: newcomer's Acquire(sub/x) with a waiter queued = %v, want a HeldError", err)
	}
}
