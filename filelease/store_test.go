//go:build linux

// Store-level tests: fences kept across releases and stores, HeldError
// details, construction, input validation, ctx and Close, and the reboot
// rule (a lease of another boot has expired).

package filelease_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/filelease"
	"golang.org/x/sys/unix"
)

func TestFenceSurvivesReleaseAndNewStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "leases")
	s1 := newStore(t, dir)
	ctx := testCtx(t, 10*time.Second)
	key := "fence-" + randHex(4)
	var last uint64
	for i := range 3 {
		r := req(key, "a", time.Minute)
		f := mustAcquire(t, s1, r)
		if f != last+1 {
			t.Fatalf("acquisition %d: fence %d, want %d", i, f, last+1)
		}
		last = f
		if err := s1.Release(ctx, r); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	if _, err := os.Stat(s1.File(key)); err != nil {
		t.Fatalf("the lease file is gone after Release: %v", err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	// A new store over the same directory (as a restarted process) continues.
	s2 := newStore(t, dir)
	info, err := s2.Inspect(ctx, key)
	if err != nil || info.Held || info.Fence != last {
		t.Fatalf("Inspect of the released key = %+v, %v; want free with the last fence %d", info, err, last)
	}
	if f := mustAcquire(t, s2, req(key, "b", time.Minute)); f != last+1 {
		t.Errorf("fence through a new store %d, want %d", f, last+1)
	}
}

func TestHeldErrorDetails(t *testing.T) {
	s := newStore(t, "")
	other := newStore(t, s.Dir())
	ctx := testCtx(t, 10*time.Second)
	key := "held-" + randHex(4)
	ttl := 5 * time.Second
	f := mustAcquire(t, s, req(key, "holder-a", ttl))
	_, err := other.Acquire(ctx, req(key, "holder-b", ttl))
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("Acquire of a held key: %v, want a *lease.HeldError", err)
	}
	if he.Key != key || he.Holder != "holder-a" || he.Fence != f || he.Remaining <= ttl/2 || he.Remaining > ttl {
		t.Errorf("HeldError = %+v, want key %q, holder %q, fence %d, remaining in (%v, %v]", he, key, "holder-a", f, ttl/2, ttl)
	}
	info, err := other.Inspect(ctx, key)
	if err != nil || !info.Held || info.Holder != "holder-a" || info.Fence != f || info.Remaining <= ttl/2 || info.Remaining > ttl {
		t.Errorf("Inspect = %+v, %v; want held by %q with fence %d", info, err, "holder-a", f)
	}
}

func TestNew(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b")
	s := newStore(t, dir)
	if s.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", s.Dir(), dir)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		t.Fatalf("New did not create %s: %v", dir, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 || perm&0o700 != 0o700 {
		t.Errorf("directory mode %v, want 0700", perm)
	}
	mustAcquire(t, s, req("k", "a", time.Minute))
	fi, err = os.Stat(s.File("k"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("lease file: %v, %v; want mode 0600", fi, err)
	}

	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		dir  string
		opts []filelease.Option
	}{
		{"empty path", "", nil},
		{"a regular file", file, nil},
		{"a mode without owner read/write", filepath.Join(base, "c"), []filelease.Option{filelease.WithFileMode(0o440)}},
	} {
		if s, err := filelease.New(tc.dir, tc.opts...); !errors.Is(err, lease.ErrInvalid) || s != nil {
			t.Errorf("New with %s: %v, %v; want ErrInvalid", tc.what, s, err)
		}
	}
}

func TestWithFileMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	s, err := filelease.New(dir, filelease.WithFileMode(0o660))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	mask := unix.Umask(0)
	unix.Umask(mask)
	mustAcquire(t, s, req("k", "a", time.Minute))
	fi, err := os.Stat(s.File("k"))
	if err != nil {
		t.Fatal(err)
	}
	if want := os.FileMode(0o660) &^ os.FileMode(mask); fi.Mode().Perm() != want {
		t.Errorf("lease file mode %v, want %v (0660 under umask %03o)", fi.Mode().Perm(), want, mask)
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := os.FileMode(0o770) &^ os.FileMode(mask); di.Mode().Perm() != want {
		t.Errorf("directory mode %v, want %v", di.Mode().Perm(), want)
	}
}

func TestInvalidRequests(t *testing.T) {
	s := newStore(t, "")
	ctx := testCtx(t, 10*time.Second)
	long := string(make([]byte, filelease.MaxKeyLen+1))
	for _, tc := range []struct {
		what string
		r    lease.Request
	}{
		{"empty key", lease.Request{Token: "t", TTL: time.Second}},
		{"key over MaxKeyLen", lease.Request{Key: long, Token: "t", TTL: time.Second}},
		{"empty token", lease.Request{Key: "k", TTL: time.Second}},
		{"TTL below MinTTL", lease.Request{Key: "k", Token: "t", TTL: filelease.MinTTL - 1}},
	} {
		if _, err := s.Acquire(ctx, tc.r); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Acquire with %s: %v, want ErrInvalid", tc.what, err)
		}
		if err := s.Renew(ctx, tc.r); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Renew with %s: %v, want ErrInvalid", tc.what, err)
		}
	}
	if _, err := s.Inspect(ctx, ""); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Inspect of the empty key: %v, want ErrInvalid", err)
	}
	entries, err := os.ReadDir(s.Dir())
	if err != nil || len(entries) != 0 {
		t.Errorf("invalid requests left files: %v, %v", entries, err)
	}
}

func TestCancelledCtxAndClose(t *testing.T) {
	s := newStore(t, "")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	r := req("cancel", "a", time.Second)
	if _, err := s.Acquire(cancelled, r); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with a cancelled ctx: %v", err)
	}
	if _, err := os.Stat(s.File(r.Key)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Acquire with a cancelled ctx touched the file: %v", err)
	}
	ctx := testCtx(t, 10*time.Second)
	mustAcquire(t, s, r)
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := sub.Next(ctx); !errors.Is(err, filelease.ErrClosed) {
		t.Errorf("Next on a subscription of a closed store: %v, want ErrClosed", err)
	}
	if _, err := s.Acquire(ctx, req("other", "a", time.Second)); !errors.Is(err, filelease.ErrClosed) {
		t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
	if err := s.Release(ctx, r); !errors.Is(err, filelease.ErrClosed) {
		t.Errorf("Release after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Subscribe(ctx); !errors.Is(err, filelease.ErrClosed) {
		t.Errorf("Subscribe after Close: %v, want ErrClosed", err)
	}
	// Close does not release: the lease is still in its file.
	if info, err := newStore(t, s.Dir()).Inspect(ctx, r.Key); err != nil || !info.Held {
		t.Errorf("after Close: Inspect = %+v, %v; want still held", info, err)
	}
}

// TestRebootExpires: a lease written under another boot id (the host
// rebooted, its monotonic clock restarted) counts as expired; its fence stays.
func TestRebootExpires(t *testing.T) {
	s := newStore(t, "")
	ctx := testCtx(t, 10*time.Second)
	key := "reboot-" + randHex(4)
	r := req(key, "before-reboot", time.Hour)
	f := mustAcquire(t, s, r)
	rewriteField(t, s.File(key), "boot", strconv.Quote("00000000-0000-4000-8000-000000000000"))
	info, err := s.Inspect(ctx, key)
	if err != nil || info.Held || info.Fence != f {
		t.Fatalf("after the simulated reboot: Inspect = %+v, %v; want free with fence %d", info, err, f)
	}
	if err := s.Renew(ctx, r); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew of a lease from another boot: %v, want ErrNotHeld", err)
	}
	if f2 := mustAcquire(t, s, req(key, "after-reboot", time.Minute)); f2 != f+1 {
		t.Errorf("fence after the simulated reboot %d, want %d", f2, f+1)
	}
}

// TestExpiryUsesMonotonicClock: a lease whose recorded expiry (in
// CLOCK_MONOTONIC nanoseconds) has passed is free, whatever its TTL was.
func TestExpiryUsesMonotonicClock(t *testing.T) {
	s := newStore(t, "")
	ctx := testCtx(t, 10*time.Second)
	key := "mono-" + randHex(4)
	r := req(key, "a", time.Hour)
	f := mustAcquire(t, s, r)
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	rewriteField(t, s.File(key), "expires", strconv.FormatInt(ts.Nano()-1, 10))
	if info, err := s.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("lease past its monotonic expiry: Inspect = %+v, %v; want free", info, err)
	}
	rewriteField(t, s.File(key), "expires", strconv.FormatInt(ts.Nano()+int64(time.Hour), 10))
	info, err := s.Inspect(ctx, key)
	if err != nil || !info.Held || info.Remaining < 59*time.Minute || info.Fence != f {
		t.Fatalf("lease an hour before its monotonic expiry: Inspect = %+v, %v; want held with about an hour left", info, err)
	}
}
