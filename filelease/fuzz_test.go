//go:build linux

// Fuzzing the on-disk format: arbitrary bytes in a lease file. Every
// operation agrees on whether the file is corrupt; a file whose checksum
// line does not hold is corrupt, never a free key; a winning Acquire gets a
// fence above the recorded one.

package filelease_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/filelease"
)

const fuzzKey = "fuzz/key"

func FuzzLeaseFile(f *testing.F) {
	// Seeds (besides testdata): a v2 file the store wrote, a key held and a
	// waiter queued, whole and with its checksum to be recomputed; a v3 one;
	// a v4 one.
	s := newStore(f, "")
	mustAcquire(f, s, req(fuzzKey, "seed", time.Hour))
	w := req(fuzzKey, "waiter", time.Hour)
	w.Queue = true
	if _, err := s.Acquire(testCtx(f, time.Minute), w); !errors.Is(err, lease.ErrHeld) {
		f.Fatalf("queued Acquire of a held key: %v, want ErrHeld", err)
	}
	b, err := os.ReadFile(s.File(fuzzKey))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, false)
	f.Add(b[:bytes.LastIndex(b, []byte("crc32c "))], true)
	// A v3 file: a reader holds, a writer and a reader wait.
	const shared = "fuzz/shared"
	for i, r := range []driver.Request{req(shared, "reader", time.Hour), req(shared, "writer", time.Hour), req(shared, "reader-2", time.Hour)} {
		r.Shared, r.Queue = i != 1, true
		_, _ = s.Acquire(testCtx(f, time.Minute), r)
	}
	if b, err = os.ReadFile(s.File(shared)); err != nil {
		f.Fatal(err)
	}
	b = bytes.Replace(b, []byte(strconv.Quote(shared)), []byte(strconv.Quote(fuzzKey)), 1)
	f.Add(b[:bytes.LastIndex(b, []byte("crc32c "))], true)
	// A v4 file: the reader's hold broken, its tombstone kept.
	if _, err := s.Break(testCtx(f, time.Minute), shared); err != nil {
		f.Fatal(err)
	}
	if b, err = os.ReadFile(s.File(shared)); err != nil {
		f.Fatal(err)
	}
	b = bytes.Replace(b, []byte(strconv.Quote(shared)), []byte(strconv.Quote(fuzzKey)), 1)
	f.Add(b[:bytes.LastIndex(b, []byte("crc32c "))], true)
	fenceLine := regexp.MustCompile(`^[^\n]*\n[^\n]*\nfence ([0-9]+)\n`) // the third line

	f.Fuzz(func(t *testing.T, data []byte, fixCRC bool) {
		if len(data) > 8<<10 {
			return
		}
		if fixCRC {
			data = withCRC(data)
		}
		s := newStore(t, "")
		if err := os.WriteFile(s.File(fuzzKey), data, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t, 10*time.Second)
		info, err := s.Inspect(ctx, fuzzKey)
		corrupt := errors.Is(err, filelease.ErrCorrupt)
		if err != nil && !corrupt {
			t.Fatalf("Inspect: %v, want nil or ErrCorrupt", err)
		}
		i := bytes.Index(data, []byte("\ncrc32c ")) + 1
		sum := fmt.Sprintf("crc32c %08x\n", crc32.Checksum(data[:i], crc32.MakeTable(crc32.Castagnoli)))
		if (i == 0 || !bytes.HasPrefix(data[i:], []byte(sum))) && !corrupt {
			t.Fatalf("Inspect of a file without a valid checksum line (%q) = %+v, want ErrCorrupt", data, info)
		}
		other := req(fuzzKey, "fuzz", time.Minute)
		g, err := s.Acquire(ctx, other)
		for op, err := range map[string]error{"Acquire": err, "Renew": s.Renew(ctx, req(fuzzKey, "", time.Minute)), "Release": s.Release(ctx, req(fuzzKey, "", time.Minute))} {
			if errors.Is(err, filelease.ErrCorrupt) != corrupt {
				t.Fatalf("%s: %v, but Inspect: corrupt %v", op, err, corrupt)
			}
		}
		switch {
		case corrupt:
		case err == nil && info.Held:
			t.Fatalf("Acquire by another token won although Inspect said held: %+v", info)
		case err == nil:
			if m := fenceLine.FindSubmatch(data); m != nil {
				if recorded, perr := strconv.ParseUint(string(m[1]), 10, 64); perr == nil && g.Fence <= recorded {
					t.Fatalf("Acquire over a record with fence %d granted fence %d", recorded, g.Fence)
				}
			}
			if err := s.Release(ctx, other); err != nil {
				t.Fatalf("Release of the lease just acquired: %v", err)
			}
		case !errors.Is(err, lease.ErrHeld) && info.Fence != 1<<64-1:
			t.Fatalf("Acquire on a well-formed record: %v, want success or ErrHeld", err)
		}
	})
}
