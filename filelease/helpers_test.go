//go:build linux

// Shared helpers of the filelease tests: stores, contexts, tokens, requests
// and rewriting a lease file as an outside event (a reboot, an edit) would.

package filelease_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
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
	t.Cleanup(func() { _ = s.Close() })
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
func req(key, holder string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Token: randHex(16), Holder: holder, TTL: ttl}
}

// mustAcquire acquires r at the store level and fails the test on error.
func mustAcquire(t testing.TB, s driver.Store, r driver.Request) uint64 {
	t.Helper()
	g, err := s.Acquire(testCtx(t, 10*time.Second), r)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", r.Key, err)
	}
	return g.Fence
}

// withCRC appends the crc32c line for body, as the documented format says.
func withCRC(body []byte) []byte {
	return fmt.Appendf(bytes.Clone(body), "crc32c %08x\n", crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
}

// rewriteField replaces the value of field in the lease file at path and
// recomputes its checksum.
func rewriteField(t testing.TB, path, field, value string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := data[:bytes.Index(data, []byte("\ncrc32c "))+1]
	line := regexp.MustCompile(`(?m)^` + field + ` .*$`)
	if !line.Match(body) {
		t.Fatalf("%s has no field %q:\n%s", path, field, data)
	}
	if err := os.WriteFile(path, withCRC(line.ReplaceAllLiteral(body, []byte(field+" "+value))), 0o600); err != nil {
		t.Fatal(err)
	}
}
