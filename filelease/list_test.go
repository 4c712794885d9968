//go:build linux

// Breaking and listing in the lease file: tombstones live in the v4 record
// through later grants and releases, lapse at the evicted hold's expiry and
// with a reboot; a long key's hashed file name is listed by its prefix.

package filelease_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/filelease"
)

func TestBreakRecord(t *testing.T) {
	s := newStore(t, "")
	ctx := testCtx(t, 30*time.Second)
	key := "broken-" + randHex(4)
	old := req(key, "stuck", 400*time.Millisecond)
	f1 := mustAcquire(t, s, old)
	if e, err := s.Break(ctx, key); err != nil || len(e.Holders) != 1 || e.Holders[0].Token != old.Token {
		t.Fatalf("Break = %+v, %v; want the stuck holder", e, err)
	}
	data, err := os.ReadFile(s.File(key))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("leasekit-file-lease v4\n")) || !bytes.Contains(data, []byte("\nbroken 1\nbroken \""+old.Token+"\" ")) {
		t.Fatalf("record after a break:\n%s\nwant v4 with the tombstone", data)
	}
	// A new holder and its release keep the tombstone: the evicted holder
	// still learns that it was broken.
	next := req(key, "next", time.Minute)
	if f2 := mustAcquire(t, s, next); f2 <= f1 {
		t.Fatalf("fence after a break %d, want more than %d", f2, f1)
	}
	if err := s.Renew(ctx, old); !errors.Is(err, lease.ErrBroken) {
		t.Fatalf("Renew of the evicted token while another holds = %v, want ErrBroken", err)
	}
	if err := s.Release(ctx, next); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, old); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release of the evicted token = %v, want ErrNotHeld", err)
	}
	if err := s.Renew(ctx, old); !errors.Is(err, lease.ErrBroken) {
		t.Fatalf("Renew of the evicted token after a release = %v, want ErrBroken", err)
	}
	// At the evicted hold's expiry the tombstone lapses.
	time.Sleep(500 * time.Millisecond)
	if err := s.Renew(ctx, old); !errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrBroken) {
		t.Fatalf("Renew after the tombstone's expiry = %v, want a plain ErrNotHeld", err)
	}
	// A tombstone of another boot is gone too.
	mustAcquire(t, s, old)
	if _, err := s.Break(ctx, key); err != nil {
		t.Fatal(err)
	}
	rewriteField(t, s.File(key), "queue-boot", `"another-boot"`)
	if err := s.Renew(ctx, old); errors.Is(err, lease.ErrBroken) || !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Renew with a tombstone of another boot = %v, want a plain ErrNotHeld", err)
	}
	// A v4 record with a tombstone line edited is corrupt.
	mustAcquire(t, s, old)
	if _, err := s.Break(ctx, key); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(s.File(key))
	body := data[:bytes.Index(data, []byte("\ncrc32c "))+1]
	if err := os.WriteFile(s.File(key), withCRC(bytes.Replace(body, []byte("\nbroken \""), []byte("\nbroken x\""), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Inspect(ctx, key); !errors.Is(err, filelease.ErrCorrupt) {
		t.Fatalf("Inspect of an edited tombstone = %v, want ErrCorrupt", err)
	}
}

func TestListLongKeys(t *testing.T) {
	s := newStore(t, "")
	ctx := testCtx(t, 30*time.Second)
	long := "long/" + strings.Repeat("k", 300)
	for _, key := range []string{long + "-a", long + "-b", "long/short", "other"} {
		mustAcquire(t, s, req(key, "h", time.Minute))
	}
	var got []string
	for cursor := ""; ; {
		page, next, err := s.List(ctx, long, cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			got = append(got, e.Key)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], long) || !strings.HasPrefix(got[1], long) || got[0] == got[1] {
		t.Fatalf("List(%.12q…) = %d keys, want the two long keys", long, len(got))
	}
}
