//go:build linux

// Shared holds in the lease file: readers are kept in the v3 record, the
// format goes back to v1 or v2 when they leave, and a v3 record edited or
// mislabelled is corrupt.

package filelease_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/filelease"
)

// sharedReq returns a shared request for key with a new token.
func sharedReq(key, holder string, ttl time.Duration) (r driver.Request) {
	r = req(key, holder, ttl)
	r.Shared = true
	return r
}

func TestSharedRecord(t *testing.T) {
	s := newStore(t, "")
	ctx := testCtx(t, 30*time.Second)
	key := "shared-" + randHex(4)
	r1, r2 := sharedReq(key, "reader-1", time.Minute), sharedReq(key, "reader-2", 2*time.Minute)
	f1, f2 := mustAcquire(t, s, r1), mustAcquire(t, s, r2)
	if f1 != 1 || f2 != 1 {
		t.Fatalf("fences of two readers %d, %d; want 1, 1 (one read epoch)", f1, f2)
	}
	data, err := os.ReadFile(s.File(key))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("leasekit-file-lease v3\n")) || !bytes.Contains(data, []byte("\nreaders 2\nreader \""+r1.Token+"\" ")) {
		t.Fatalf("record of two readers:\n%s\nwant v3 with both readers", data)
	}
	info, err := s.Inspect(ctx, key)
	if err != nil || !info.Held || !info.Shared || info.Readers != 2 || info.Fence != 1 || info.Remaining <= time.Minute {
		t.Fatalf("Inspect = %+v, %v; want held shared by 2 readers, fence 1, the last reader's 2 minutes left", info, err)
	}

	// A queued writer waits for both readers, and bars a new reader.
	w := req(key, "writer", time.Minute)
	w.Queue = true
	var he *lease.HeldError
	if _, err := s.Acquire(ctx, w); !errors.As(err, &he) || he.Fence != 1 || he.Remaining <= time.Minute || he.Queued != 0 {
		t.Fatalf("writer's Acquire = %v (%+v); want a HeldError, fence 1, more than a minute left, nobody queued ahead", err, he)
	}
	r3 := sharedReq(key, "reader-3", time.Minute)
	r3.Queue = true
	if _, err := s.Acquire(ctx, r3); !errors.As(err, &he) || he.Queued != 1 {
		t.Fatalf("reader's Acquire behind a queued writer = %v; want a HeldError, one queued ahead", err)
	}
	if data, _ = os.ReadFile(s.File(key)); !bytes.Contains(data, []byte("\nwaiter \""+r3.Token+"\" ")) || !bytes.Contains(data, []byte(" shared\nreaders 2\n")) {
		t.Fatalf("record with a shared waiter:\n%s", data)
	}
	if errs := s.RenewMany(ctx, []driver.Request{r1, r2, w, req(key, "", time.Minute)}); errs[0] != nil || errs[1] != nil ||
		!errors.Is(errs[2], lease.ErrNotHeld) || !errors.Is(errs[3], lease.ErrNotHeld) {
		t.Fatalf("RenewMany of two readers, a waiter and a stranger = %v; want nil, nil, ErrNotHeld, ErrNotHeld", errs)
	}
	for _, r := range []driver.Request{r1, r2} {
		if err := s.Release(ctx, r); err != nil {
			t.Fatalf("Release of %s: %v", r.Holder, err)
		}
	}
	if g, err := s.Acquire(ctx, w); err != nil || g.Fence != 2 {
		t.Fatalf("writer's Acquire after the readers left = %+v, %v; want fence 2", g, err)
	}
	if err := s.Release(ctx, w); err != nil {
		t.Fatal(err)
	}
	if f := mustAcquire(t, s, r3); f != 3 {
		t.Fatalf("reader after the writer: fence %d, want 3 (a new epoch)", f)
	}
	if err := s.Release(ctx, r3); err != nil {
		t.Fatal(err)
	}
	if data, _ = os.ReadFile(s.File(key)); !bytes.HasPrefix(data, []byte("leasekit-file-lease v1\n")) {
		t.Fatalf("record of a free key:\n%s\nwant v1 again", data)
	}

	// A reader's line must parse, and only v3 knows readers and shared waiters.
	mustAcquire(t, s, r1)
	w.Queue, r3.Queue = true, true
	_, _ = s.Acquire(ctx, w)
	_, _ = s.Acquire(ctx, r3)
	full, err := os.ReadFile(s.File(key))
	if err != nil {
		t.Fatal(err)
	}
	body := full[:bytes.Index(full, []byte("crc32c"))]
	cases := map[string][]byte{
		"v3 called v2":            bytes.Replace(body, []byte("v3\n"), []byte("v2\n"), 1),
		"a reader's expiry":       bytes.Replace(body, []byte(r1.Token+"\" "), []byte(r1.Token+"\" x"), 1),
		"a reader's token":        []byte(strings.Replace(string(body), "reader \"", "reader ", 1)),
		"a reader too many":       bytes.Replace(body, []byte("readers 1\n"), []byte("readers 2\n"), 1),
		"a waiter's unknown flag": bytes.Replace(body, []byte(" shared\n"), []byte(" shard\n"), 1),
	}
	for what, data := range cases {
		if bytes.Equal(data, body) {
			t.Fatalf("%s: the edit changed nothing in\n%s", what, body)
		}
		if err := os.WriteFile(s.File(key), withCRC(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Inspect(ctx, key); !errors.Is(err, filelease.ErrCorrupt) {
			t.Errorf("%s: Inspect = %v, want ErrCorrupt", what, err)
		}
	}
	// A reader's holder that does not parse is no corruption.
	if err := os.WriteFile(s.File(key), withCRC(bytes.Replace(body, []byte(` "reader-1"`), []byte(` "unterminated`), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Inspect(ctx, key); err != nil || !info.Shared || info.Readers != 1 || info.Holder == "reader-1" {
		t.Errorf("Inspect with a reader's holder unquoted = %+v, %v; want the reader, its holder unreadable", info, err)
	}
	if err := os.WriteFile(s.File(key), full, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx, r1); err != nil {
		t.Errorf("Renew of the reader after restoring its file: %v", err)
	}
}
