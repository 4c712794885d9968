//go:build linux

// Fuzzing the on-disk format: arbitrary bytes in a lease file. Every
// operation either works on a well-formed record of the key or fails with
// ErrCorrupt; a file that is not a well-formed record is never treated as a
// free key (which could let a second holder in). The test decides
// well-formedness with its own reading of the documented format.

package filelease_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/filelease"
)

const fuzzKey = "fuzz/key"

// docRecord is a lease file as the package documentation describes it.
type docRecord struct {
	key, token, holder, boot string
	fence, expires           uint64
	queueBoot                string   // v2 only
	waiters                  []string // v2 only: the queued tokens
}

// parseDoc reads data by the documented format, independently of the
// package: magic line (v1 or v2), key, fence, token, holder, boot, expires,
// for v2 also queue-boot, "waiters N" and N lines "waiter TOKEN EXPIRES"
// (distinct non-empty tokens), then the CRC-32C (8 hex digits) of the
// preceding lines; bytes after that are ignored. The token and holder need
// not parse (see the package documentation's "Failure behaviour").
func parseDoc(data []byte) (docRecord, bool) {
	var r docRecord
	lines := bytes.SplitAfter(data, []byte("\n"))
	i, n := 0, 0 // the next line and the offset where it starts
	next := func(name string) (string, bool) {
		if i >= len(lines) || !bytes.HasSuffix(lines[i], []byte("\n")) {
			return "", false
		}
		l := lines[i]
		i++
		n += len(l)
		s := string(l[:len(l)-1])
		if name == "" {
			return s, true
		}
		v, ok := strings.CutPrefix(s, name+" ")
		return v, ok
	}
	magic, ok := next("")
	if !ok || (magic != "leasekit-file-lease v1" && magic != "leasekit-file-lease v2") {
		return r, false
	}
	names := []string{"key", "fence", "token", "holder", "boot", "expires"}
	if magic == "leasekit-file-lease v2" {
		names = append(names, "queue-boot", "waiters")
	}
	vals := make(map[string]string)
	for _, name := range names {
		if vals[name], ok = next(name); !ok {
			return r, false
		}
	}
	var err error
	quoted := func(v string) string {
		if err != nil {
			return ""
		}
		if len(v) == 0 || v[0] != '"' {
			err = errors.New("not quoted")
			return ""
		}
		s, e := strconv.Unquote(v)
		err = e
		return s
	}
	number := func(v string) uint64 {
		if err != nil {
			return 0
		}
		u, e := strconv.ParseUint(v, 10, 64)
		err = e
		return u
	}
	// The token and holder only need to be there: an over-long or
	// unparseable one is a lease of an unknown token, or an unknown holder.
	r.token, r.holder = loose(vals["token"]), loose(vals["holder"])
	r.key, r.fence = quoted(vals["key"]), number(vals["fence"])
	r.boot, r.expires = quoted(vals["boot"]), number(vals["expires"])
	if magic == "leasekit-file-lease v2" {
		r.queueBoot = quoted(vals["queue-boot"])
		count := number(vals["waiters"])
		seen := map[string]bool{}
		for w := uint64(0); w < count && err == nil; w++ {
			v, ok := next("waiter")
			if !ok {
				return r, false
			}
			tok, e := strconv.QuotedPrefix(v)
			if e != nil {
				return r, false
			}
			token := quoted(tok)
			exp, ok := strings.CutPrefix(v[len(tok):], " ")
			if !ok || number(exp) > 1<<63-1 {
				return r, false
			}
			if err == nil && (token == "" || seen[token]) {
				return r, false
			}
			seen[token] = true
			r.waiters = append(r.waiters, token)
		}
	}
	sumAt := n
	sum, ok := next("crc32c")
	if err != nil || !ok || len(sum) != 8 {
		return r, false
	}
	want, e := strconv.ParseUint(sum, 16, 32)
	if e != nil || uint32(want) != crc32.Checksum(data[:sumAt], crc32.MakeTable(crc32.Castagnoli)) {
		return r, false
	}
	if r.expires > 1<<63-1 || (r.token == "" && (r.holder != "" || r.expires != 0)) {
		return r, false
	}
	return r, true
}

// loose reads a token or holder field as parseDoc needs it: empty when it is
// "", and otherwise present, whatever it holds.
func loose(v string) string {
	if v == `""` {
		return ""
	}
	return "present"
}

// withCRC appends the crc32c line for body.
func withCRC(body []byte) []byte {
	return fmt.Appendf(bytes.Clone(body), "crc32c %08x\n", crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
}

func FuzzLeaseFile(f *testing.F) {
	// Seeds: real files written by the store (held and released), and edits.
	dir := f.TempDir()
	s, err := filelease.New(dir)
	if err != nil {
		f.Fatal(err)
	}
	ctx := testCtx(f, time.Minute)
	r := lease.Request{Key: fuzzKey, Token: "0123456789abcdef0123456789abcdef", Holder: "seed:1", TTL: time.Hour}
	if _, err := s.Acquire(ctx, r); err != nil {
		f.Fatal(err)
	}
	held, err := os.ReadFile(s.File(fuzzKey))
	if err != nil {
		f.Fatal(err)
	}
	// A waiter queued (a v2 file), while the key is held and once it is free.
	w := lease.Request{Key: fuzzKey, Token: "fedcba9876543210fedcba9876543210", Holder: "seed:2", TTL: time.Hour, Queue: true}
	if _, err := s.Acquire(ctx, w); !errors.Is(err, lease.ErrHeld) {
		f.Fatalf("queued Acquire of a held key: %v", err)
	}
	heldQueued, err := os.ReadFile(s.File(fuzzKey))
	if err != nil {
		f.Fatal(err)
	}
	if err := s.Release(ctx, r); err != nil {
		f.Fatal(err)
	}
	freeQueued, err := os.ReadFile(s.File(fuzzKey))
	if err != nil {
		f.Fatal(err)
	}
	if err := s.Release(ctx, w); !errors.Is(err, lease.ErrNotHeld) {
		f.Fatalf("Release of a queued token: %v", err)
	}
	free, err := os.ReadFile(s.File(fuzzKey))
	if err != nil {
		f.Fatal(err)
	}
	_ = s.Close()
	for _, b := range [][]byte{held, free, heldQueued, freeQueued} {
		f.Add(b, false)
		f.Add(b[:len(b)/2], false)
		f.Add(append(bytes.Clone(b), "trailing tail of an older record\n"...), false)
		body := b[:bytes.LastIndex(b, []byte("crc32c "))]
		f.Add(body, true)
		f.Add(bytes.Replace(body, []byte("fence "), []byte("fence 18446744073709551615"), 1), true)
	}
	f.Add([]byte{}, false)
	f.Add([]byte("leasekit-file-lease v1\nkey \"other\"\nfence 7\ntoken \"\"\nholder \"\"\nboot \"\"\nexpires 0\n"), true)
	f.Add([]byte("leasekit-file-lease v1\nkey \"fuzz/key\"\nfence 18446744073709551615\ntoken \"\"\nholder \"\"\nboot \"\"\nexpires 0\n"), true)
	f.Add([]byte("leasekit-file-lease v1\nkey \"fuzz/key\"\nfence 3\ntoken \"t\"\nholder \"\"\nboot \"\"\nexpires 9223372036854775808\n"), true)
	f.Add([]byte("leasekit-file-lease v2\nkey \"fuzz/key\"\nfence 3\ntoken \"\"\nholder \"\"\nboot \"\"\nexpires 0\nqueue-boot \"b\"\nwaiters 2\nwaiter \"a\\\" b\" 5\nwaiter \"a\\\" b\" 6\n"), true)
	f.Add([]byte("leasekit-file-lease v2\nkey \"fuzz/key\"\nfence 3\ntoken \"\"\nholder \"\"\nboot \"\"\nexpires 0\nqueue-boot \"b\"\nwaiters 0\n"), true)

	f.Fuzz(func(t *testing.T, data []byte, fixCRC bool) {
		if len(data) > 8<<10 {
			return
		}
		if fixCRC {
			data = withCRC(data)
		}
		s, err := filelease.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := os.WriteFile(s.File(fuzzKey), data, 0o600); err != nil {
			t.Fatal(err)
		}
		doc, ok := parseDoc(data)
		wellFormed := ok && doc.key == fuzzKey
		ctx := testCtx(t, 10*time.Second)
		check := func(op string, err error) {
			t.Helper()
			switch {
			case !wellFormed && !errors.Is(err, filelease.ErrCorrupt):
				t.Fatalf("%s on a malformed file (%q) = %v, want ErrCorrupt", op, data, err)
			case wellFormed && errors.Is(err, filelease.ErrCorrupt):
				t.Fatalf("%s on a well-formed record (%q) = %v, want no ErrCorrupt", op, data, err)
			}
		}
		info, err := s.Inspect(ctx, fuzzKey)
		check("Inspect", err)
		if err == nil && info.Fence != doc.fence {
			t.Fatalf("Inspect fence %d, the file says %d", info.Fence, doc.fence)
		}
		other := lease.Request{Key: fuzzKey, Token: randHex(16), Holder: "fuzz", TTL: time.Minute}
		check("Renew", s.Renew(ctx, other))
		check("Release", s.Release(ctx, other))
		g, err := s.Acquire(ctx, other)
		check("Acquire", err)
		if err == nil {
			// Won: the recorded lease must have been free or expired, and
			// the new fence must exceed the recorded one.
			if g.Fence <= doc.fence {
				t.Fatalf("Acquire over a record with fence %d granted fence %d", doc.fence, g.Fence)
			}
			if info.Held {
				t.Fatalf("Acquire by another token succeeded although Inspect said held: %+v", info)
			}
			if err := s.Release(ctx, other); err != nil {
				t.Fatalf("Release of the lease just acquired: %v", err)
			}
		} else if wellFormed && !errors.Is(err, lease.ErrHeld) && !(doc.fence == 1<<64-1) {
			t.Fatalf("Acquire on a well-formed record: %v (want success or ErrHeld)", err)
		}
	})
}
