//go:build linux

// Shared helpers of the filelease tests: stores, contexts, tokens, requests
// and rewriting a lease file as an outside event (a reboot, a torn write)
// would.

package filelease_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/filelease"
)

// newStore returns a store over dir (a fresh temporary directory when dir is
// ""), closed when the test ends.
func newStore(t testing.TB, dir string) *filelease.Store {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "leases")
	}
	s, err := filelease.New(dir)
	if err != nil {
		t.Fatalf("filelease.New(%q): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	return s
}

// testCtx returns a context that ends with the test or after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// req returns a request for key with a new token.
func req(key, holder string, ttl time.Duration) lease.Request {
	return lease.Request{Key: key, Token: randHex(16), Holder: holder, TTL: ttl}
}

// mustAcquire acquires r at the store level and fails the test on error.
func mustAcquire(t testing.TB, s lease.Store, r lease.Request) uint64 {
	t.Helper()
	g, err := s.Acquire(testCtx(t, 10*time.Second), r)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", r.Key, err)
	}
	return g.Fence
}

// rewriteField replaces the value of field in the lease file at path and
// recomputes its checksum, as the documented format describes it.
func rewriteField(t testing.TB, path, field, value string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	found := false
	for _, line := range strings.SplitAfter(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "crc32c "):
			continue
		case strings.HasPrefix(line, field+" "):
			line = field + " " + value + "\n"
			found = true
		}
		body.WriteString(line)
	}
	if !found {
		t.Fatalf("%s has no field %q:\n%s", path, field, data)
	}
	sum := crc32.Checksum([]byte(body.String()), crc32.MakeTable(crc32.Castagnoli))
	out := body.String() + fmt.Sprintf("crc32c %08x\n", sum)
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
}
