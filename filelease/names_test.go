//go:build linux

// Path traversal: whatever the key, its lease file is a direct child of the
// store's directory with a legal name, and distinct keys get distinct files.

package filelease_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/filelease"
)

// hostileKeys are keys that would escape or confuse a naive mapping.
var hostileKeys = []string{
	"..", ".", "../x", "../../etc/passwd", "/etc/passwd", "a/b", "a/../b", "./a",
	"a\x00b", "\\..\\x", "~", "a~b", "%2E%2E%2Fx", "%", "k.lease", ".lease", "-",
	"é/ü", " ", "a b\nc\td", "*", "$(id)",
	strings.Repeat("/", filelease.MaxKeyLen),
	strings.Repeat("../", filelease.MaxKeyLen/3),
	strings.Repeat("é", filelease.MaxKeyLen/2),
	strings.Repeat("a", filelease.MaxKeyLen),
	strings.Repeat("a", filelease.MaxKeyLen-1) + "b", // same long prefix, different key
	strings.Repeat("a", 200) + "%",
	strings.Repeat("a", 183) + "/" + strings.Repeat("b", 100), // escape at the cut
	strings.Repeat("a", 184) + "/" + strings.Repeat("b", 100),
	strings.Repeat("a", 185) + "/" + strings.Repeat("b", 100),
}

func TestKeysStayInDirectory(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "leases")
	s := newStore(t, dir)
	other := newStore(t, dir)
	ctx := testCtx(t, 30*time.Second)
	files := make(map[string]string)
	for _, key := range hostileKeys {
		path := s.File(key)
		if filepath.Dir(path) != s.Dir() {
			t.Errorf("File(%q) = %q, not directly in %q", key, path, s.Dir())
		}
		name := filepath.Base(path)
		if len(name) > 255 || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") {
			t.Errorf("File(%q) has the bad name %q", key, name)
		}
		if k, dup := files[name]; dup {
			t.Errorf("keys %q and %q share the file %q", k, key, name)
		}
		files[name] = key
		if f := mustAcquire(t, s, req(key, "h", time.Minute)); f != 1 {
			t.Errorf("Acquire(%q): fence %d, want 1 (a file of its own)", key, f)
		}
	}
	for _, key := range hostileKeys {
		if info, err := other.Inspect(ctx, key); err != nil || !info.Held || info.Fence != 1 {
			t.Errorf("Inspect(%q) = %+v, %v; want held with fence 1", key, info, err)
		}
	}
	// Nothing was written outside the directory, and the directory holds
	// exactly one lease file per key and nothing else.
	outside, err := os.ReadDir(base)
	if err != nil || len(outside) != 1 || outside[0].Name() != "leases" {
		t.Errorf("entries beside the store's directory: %v, %v; want only %q", outside, err, "leases")
	}
	inside, err := os.ReadDir(dir)
	if err != nil || len(inside) != len(hostileKeys) {
		t.Errorf("%d entries in the directory (%v), want %d", len(inside), err, len(hostileKeys))
	}
	for _, e := range inside {
		if _, ok := files[e.Name()]; !ok || !e.Type().IsRegular() {
			t.Errorf("unexpected entry %q (%v) in the directory", e.Name(), e.Type())
		}
	}
}

// TestSymlinkNotFollowed: a symbolic link planted under a key's file name is
// not followed: the operation fails and the link's target is untouched.
func TestSymlinkNotFollowed(t *testing.T) {
	s := newStore(t, "")
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, s.File("planted")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(testCtx(t, 10*time.Second), req("planted", "a", time.Minute)); err == nil {
		t.Errorf("Acquire through a planted symlink succeeded")
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "precious" {
		t.Errorf("the symlink's target now holds %q, %v", b, err)
	}
}
