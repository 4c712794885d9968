//go:build linux

// Corrupt lease files are ErrCorrupt, never free; deleting the file is the
// way out. An over-long holder or token is no corruption: its lease lapses.

package filelease_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/filelease"
)

// wantCorrupt checks that every operation on r.Key fails with ErrCorrupt.
func wantCorrupt(t *testing.T, s *filelease.Store, r driver.Request, what string) {
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

func TestCorruptFiles(t *testing.T) {
	s := newStore(t, "")
	r := req("corrupt-"+randHex(4), "holder", time.Minute)
	mustAcquire(t, s, r)
	path := s.File(r.Key)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	other := req("other-"+randHex(4), "holder", time.Minute)
	mustAcquire(t, s, other)
	foreign, err := os.ReadFile(s.File(other.Key))
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(full)
	flipped[len(full)/2] ^= 0x04
	cases := map[string][]byte{
		"fence changed without the checksum": bytes.Replace(full, []byte("fence 1\n"), []byte("fence 7\n"), 1),
		"token cleared without the checksum": bytes.Replace(full, []byte("token \""+r.Token+"\""), []byte(`token ""`), 1),
		"a flipped bit":                      flipped,
		"garbage":                            []byte("not a lease file\n"),
		"another version":                    withCRC(bytes.Replace(full[:bytes.Index(full, []byte("crc32c"))], []byte("v1\n"), []byte("v9\n"), 1)),
		"a torn write (new head, old tail)":  append(bytes.Clone(full[:len(full)/2]), make([]byte, len(full)-len(full)/2)...),
		"a copy of another key's file":       foreign,
	}
	for n := range len(full) { // every truncation, the empty file included
		cases[fmt.Sprintf("truncated to %d bytes", n)] = full[:n]
	}
	for what, data := range cases {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, s, r, what)
	}
	// Restored, the lease is intact; bytes after the checksum line (left
	// when a writer died before cutting the file) do not matter.
	if err := os.WriteFile(path, append(bytes.Clone(full), "holder \"old\"\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(testCtx(t, 10*time.Second), r); err != nil {
		t.Errorf("Renew after restoring the file: %v", err)
	}
	// The documented way out: delete the file. The fence restarts.
	if err := os.WriteFile(path, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
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
			const ttl = time.Second
			victim := req("planted-"+randHex(4), "victim", ttl)
			start := time.Now() // the lease expires no earlier than start + ttl
			fence := mustAcquire(t, s, victim)
			rewriteField(t, s.File(victim.Key), tc.field, tc.value)

			info, err := s.Inspect(ctx, victim.Key)
			if err != nil || len(info.Holder) > lease.MaxHolderLen || time.Since(start) < ttl && (!info.Held || info.Fence != fence) {
				t.Fatalf("Inspect = held %v, fence %d, holder of %d bytes, %v; want held with fence %d and a short holder",
					info.Held, info.Fence, len(info.Holder), err, fence)
			}
			intruder := req(victim.Key, "intruder", time.Minute)
			if _, err := s.Acquire(ctx, intruder); !errors.Is(err, lease.ErrHeld) && time.Since(start) < ttl {
				t.Fatalf("Acquire before the expiry: %v, want ErrHeld", err)
			}
			time.Sleep(ttl + 50*time.Millisecond)
			g, err := s.Acquire(ctx, intruder)
			if err != nil {
				t.Fatalf("Acquire after the planted lease's TTL: %v; want the key (it was unusable until the file was deleted)", err)
			}
			if g.Fence != fence+1 {
				t.Errorf("fence %d after the planted lease, want %d", g.Fence, fence+1)
			}
			if fi, err := os.Stat(s.File(victim.Key)); err != nil || fi.Size() > 4<<10 {
				t.Errorf("the file after the new grant: %v, %v; want a record of a few hundred bytes", fi, err)
			}
		})
	}
}
