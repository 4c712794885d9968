//go:build linux

// Corrupt lease files: truncated, torn, edited, empty or foreign files are
// reported with ErrCorrupt and never treated as free; deleting the file by
// hand is the way out (and resets the fence).

package filelease_test

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/filelease"
)

// wantCorrupt checks that every operation on r.Key fails with ErrCorrupt.
func wantCorrupt(t *testing.T, s *filelease.Store, r lease.Request, what string) {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	if g, err := s.Acquire(ctx, req(r.Key, "intruder", time.Minute)); !errors.Is(err, filelease.ErrCorrupt) {
		t.Errorf("%s: Acquire by another token = %+v, %v; want ErrCorrupt", what, g, err)
	}
	if _, err := s.Acquire(ctx, r); !errors.Is(err, filelease.ErrCorrupt) {
		t.Errorf("%s: Acquire by the holder: %v, want ErrCorrupt", what, err)
	}
	if err := s.Renew(ctx, r); !errors.Is(err, filelease.ErrCorrupt) {
		t.Errorf("%s: Renew: %v, want ErrCorrupt", what, err)
	}
	if err := s.Release(ctx, r); !errors.Is(err, filelease.ErrCorrupt) {
		t.Errorf("%s: Release: %v, want ErrCorrupt", what, err)
	}
	if info, err := s.Inspect(ctx, r.Key); !errors.Is(err, filelease.ErrCorrupt) {
		t.Errorf("%s: Inspect = %+v, %v; want ErrCorrupt", what, info, err)
	}
}

func TestTruncatedFileIsCorrupt(t *testing.T) {
	s := newStore(t, "")
	r := req("trunc-"+randHex(4), "holder", time.Minute)
	mustAcquire(t, s, r)
	path := s.File(r.Key)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(full) { // every truncation, the empty file included
		if err := os.WriteFile(path, full[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, s, r, "truncated to "+strconv.Itoa(n)+" bytes")
		if t.Failed() {
			t.Fatalf("stopping at truncation %d of %d", n, len(full))
		}
	}
	// Restored, the lease is intact.
	if err := os.WriteFile(path, full, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(testCtx(t, 10*time.Second), r); err != nil {
		t.Errorf("Renew after restoring the file: %v", err)
	}
}

func TestEditedFileIsCorrupt(t *testing.T) {
	s := newStore(t, "")
	r := req("edit-"+randHex(4), "holder", time.Minute)
	mustAcquire(t, s, r)
	path := s.File(r.Key)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"fence changed without the checksum": bytes.Replace(full, []byte("fence 1\n"), []byte("fence 7\n"), 1),
		"token cleared without the checksum": bytes.Replace(full, []byte("token \""+r.Token+"\""), []byte(`token ""`), 1),
		"a flipped bit":                      flip(full, len(full)/2),
		"garbage":                            []byte("not a lease file\n"),
		"another version":                    bytes.Replace(full, []byte("v1\n"), []byte("v9\n"), 1),
		"a torn write (new head, old tail)":  append(append([]byte{}, full[:len(full)/2]...), bytes.Repeat([]byte{0}, len(full)-len(full)/2)...),
	}
	for what, data := range cases {
		if bytes.Equal(data, full) {
			t.Fatalf("%s: the edit changed nothing", what)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, s, r, what)
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte{}, b...)
	c[i] ^= 0x04
	return c
}

// TestForeignFileIsCorrupt: a valid lease file under another key's name
// (copied or renamed by hand) is not taken for that key's.
func TestForeignFileIsCorrupt(t *testing.T) {
	s := newStore(t, "")
	a := req("a-"+randHex(4), "holder", time.Minute)
	mustAcquire(t, s, a)
	b := req("b-"+randHex(4), "holder", time.Minute)
	data, err := os.ReadFile(s.File(a.Key))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.File(b.Key), data, 0o600); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, s, b, "a copy of another key's file")
}

// TestStaleTailIgnored: bytes after the checksum line (left when a writer
// died before cutting the file to length) do not matter.
func TestStaleTailIgnored(t *testing.T) {
	s := newStore(t, "")
	r := req("tail-"+randHex(4), "holder", time.Minute)
	f := mustAcquire(t, s, r)
	path := s.File(r.Key)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, "holder \"old\"\nexpires 5\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	if info, err := s.Inspect(ctx, r.Key); err != nil || !info.Held || info.Fence != f {
		t.Fatalf("with a stale tail: Inspect = %+v, %v; want held with fence %d", info, err, f)
	}
	// The next write cuts the tail off.
	if err := s.Release(ctx, r); err != nil {
		t.Fatalf("Release: %v", err)
	}
	after, err := os.ReadFile(path)
	if err != nil || bytes.Contains(after, []byte(`"old"`)) {
		t.Errorf("after Release the file still has the stale tail (%v):\n%s", err, after)
	}
}

// TestDeleteCorruptFileRecovers: the documented way out. Deleting the file
// frees the key, and its fence restarts.
func TestDeleteCorruptFileRecovers(t *testing.T) {
	s := newStore(t, "")
	r := req("recover-"+randHex(4), "holder", time.Minute)
	mustAcquire(t, s, r)
	mustAcquire(t, s, r)
	if err := os.WriteFile(s.File(r.Key), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, s, r, "junk")
	if err := os.Remove(s.File(r.Key)); err != nil {
		t.Fatal(err)
	}
	if f := mustAcquire(t, s, req(r.Key, "new", time.Minute)); f != 1 {
		t.Errorf("fence after deleting the file %d, want 1 (it restarts)", f)
	}
}

// TestOverlongHolderLapses: a record whose checksum holds but whose holder
// or token is over-long or does not parse (planted by anyone who can write
// the file; a 2 MB holder stored through the Store API once made a key
// unusable until the file was deleted by hand) holds the key until its
// expiry, like any lease, and no longer.
func TestOverlongHolderLapses(t *testing.T) {
	huge := strings.Repeat("h", 2<<20)
	cases := []struct{ what, field, value string }{
		{"a 2 MB holder", "holder", strconv.Quote(huge)},
		{"an unparseable holder", "holder", `"unterminated`},
		{"a 2 MB token", "token", strconv.Quote(huge)},
		{"an unparseable token", "token", "not-quoted"},
	}
	for _, tc := range cases {
		t.Run(tc.what, func(t *testing.T) {
			s := newStore(t, "")
			ctx := testCtx(t, 30*time.Second)
			const ttl = 500 * time.Millisecond
			victim := req("planted-"+randHex(4), "victim", ttl)
			fence := mustAcquire(t, s, victim)
			rewriteField(t, s.File(victim.Key), tc.field, tc.value)
			planted := time.Now()

			info, err := s.Inspect(ctx, victim.Key)
			if err != nil || !info.Held || info.Fence != fence || len(info.Holder) > lease.MaxHolderLen {
				t.Fatalf("%s: Inspect = held %v, fence %d, holder of %d bytes, %v; want held with fence %d and a short holder",
					tc.what, info.Held, info.Fence, len(info.Holder), err, fence)
			}
			intruder := req(victim.Key, "intruder", time.Minute)
			if _, err := s.Acquire(ctx, intruder); !errors.Is(err, lease.ErrHeld) && time.Since(planted) < ttl {
				t.Fatalf("%s: Acquire before the expiry: %v, want ErrHeld", tc.what, err)
			}
			time.Sleep(ttl + 50*time.Millisecond)
			g, err := s.Acquire(ctx, intruder)
			if err != nil {
				t.Fatalf("%s: Acquire after the planted lease's TTL: %v; want the key (it was unusable until the file was deleted)", tc.what, err)
			}
			if g.Fence != fence+1 {
				t.Errorf("%s: fence %d after the planted lease, want %d", tc.what, g.Fence, fence+1)
			}
			if fi, err := os.Stat(s.File(victim.Key)); err != nil || fi.Size() > 4<<10 {
				t.Errorf("%s: the file after the new grant: %v, %v; want a record of a few hundred bytes", tc.what, fi, err)
			}
		})
	}
}
