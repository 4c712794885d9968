// What the suite cannot see: announcements, the record's layout, keys,
// options, the server's clock.

package natslease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/natslease"
)

func req(key, holder string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Token: randHex(16), Holder: holder, TTL: ttl}
}

// TestAnnouncements: a release, a release that keeps a tombstone and a break
// are announced; a renewal is not.
func TestAnnouncements(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	_, js := connect(t, natsURL(t))
	s := newStore(t, js, testNS())
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	next := func(want string) {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if a, err := sub.Next(nctx); err != nil || a != (driver.Announcement{Key: want}) {
			t.Fatalf("Next = %+v, %v; want %q", a, err, want)
		}
	}
	a := req("a.b c", "a", 5*time.Second)
	if _, err := s.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	next(a.Key)
	b := req("k", "b", 5*time.Second)
	if _, err := s.Acquire(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Break(ctx, b.Key); err != nil {
		t.Fatal(err)
	}
	next(b.Key)
	if err := s.Renew(ctx, b); !errors.Is(err, lease.ErrBroken) {
		t.Errorf("Renew after Break = %v, want ErrBroken", err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Next(ctx); err == nil {
		t.Errorf("Next after Close returned no error")
	}
}

// TestBadInput: names that are not KV tokens, a foreign cursor and a value
// that is not a lease record are refused, typed.
func TestBadInput(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	_, js := connect(t, natsURL(t))
	for _, opt := range []natslease.Option{natslease.WithBucket("a.b"), natslease.WithBucket(""), natslease.WithNamespace("x>"), natslease.WithNamespace("_clock"), nil} {
		if _, err := natslease.New(ctx, js, opt); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("New with a bad option: %v, want ErrInvalid", err)
		}
	}
	if _, err := natslease.New(ctx, nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
	ns := testNS()
	s := newStore(t, js, ns)
	if _, _, err := s.List(ctx, "", "x", 10); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("List with a foreign cursor: %v, want ErrInvalid", err)
	}
	kv, err := js.KeyValue(ctx, testBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, ns+".junk", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, req("junk", "a", time.Second)); err == nil || errors.Is(err, lease.ErrHeld) {
		t.Errorf("Acquire over a foreign value: %v, want an error", err)
	}
	if page, _, err := s.List(ctx, "", "", 10); err != nil || len(page) != 0 {
		t.Errorf("List over a foreign value = %+v, %v; want it skipped", page, err)
	}
}
