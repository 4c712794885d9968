//go:build linux

// The store's directory: New refuses one another user could take over (a
// directory pre-created by another user, group- or world-writable, or a
// symbolic link) with ErrUnsafeDir, and creates missing ones 0700.

package filelease_test

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/internal/usertest"
	"golang.org/x/sys/unix"
)

// TestOtherUserPrecreatedDir: the attack on the /tmp fallback of the
// default directory. Another local user creates /tmp/leasekit-<uid> (mode
// 0777) before the victim, with a lease file of its own (mode 0666) in it.
// Accepting the directory lets that user read the victim's token and write
// the lease file: two holders. New must refuse it.
func TestOtherUserPrecreatedDir(t *testing.T) {
	attacker := usertest.New(t)
	ctx := testCtx(t, 30*time.Second)
	// A shared sticky directory, as /tmp is.
	shared, err := os.MkdirTemp("", "leasekit-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(shared, "leasekit-"+strconv.Itoa(os.Getuid()))
	if out, err := attacker.Run(ctx, "mkdir", "-m", "0777", dir); err != nil {
		t.Fatalf("the other user's mkdir: %v: %s", err, out)
	}
	// Its own lease file (mode 0666) in it, free.
	cmd := attacker.Command(ctx, "sh", "-c", `umask 0; cat > "$1"`, "sh", filepath.Join(dir, "orders.lease"))
	cmd.Stdin = bytes.NewReader(withCRC([]byte("leasekit-file-lease v1\nkey \"orders\"\nfence 0\ntoken \"\"\nholder \"\"\nboot \"\"\nexpires 0\n")))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the other user writing its lease file: %v: %s", err, out)
	}

	s, err := filelease.New(dir)
	if !errors.Is(err, filelease.ErrUnsafeDir) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("New on %s, created by uid %d with mode 0777 and holding its lease file: %v; want ErrUnsafeDir "+
			"(that user could read the victim's token and rewrite the file)", dir, attacker.UID, err)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "owned by uid "+strconv.Itoa(int(attacker.UID))) {
		t.Errorf("the error does not name the path and the owner: %v", err)
	}
	// Sharing with a group the process is not in does not make it safe.
	if s, err := filelease.New(dir, filelease.WithFileMode(0o660)); !errors.Is(err, filelease.ErrUnsafeDir) {
		t.Errorf("New with WithFileMode(0o660) on the other user's directory: %v, %v; want ErrUnsafeDir", s, err)
	}
}

// TestGroupWritableDirRefused: a directory its group or everyone can write
// to is refused, sticky or not, unless WithFileMode shares the leases as
// widely; group or world read alone is fine.
func TestGroupWritableDirRefused(t *testing.T) {
	base := t.TempDir()
	for _, tc := range []struct {
		perm, mode os.FileMode // the directory's; WithFileMode's (0: the default)
		ok         bool
	}{
		{0o770, 0, false}, {0o730, 0, false}, {0o777, 0, false}, {0o1777, 0, false}, {0o703, 0, false},
		{0o777, 0o660, false}, {0o770, 0o660, true}, {0o755, 0, true}, {0o700, 0, true},
	} {
		dir := filepath.Join(base, fmt.Sprintf("d%04o-%03o", tc.perm, tc.mode))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Chmod(dir, uint32(tc.perm)); err != nil {
			t.Fatal(err)
		}
		s, err := filelease.New(dir, filelease.WithFileMode(cmp.Or(tc.mode, filelease.DefaultFileMode)))
		switch {
		case tc.ok && err != nil:
			t.Errorf("New on a directory of mode %04o (file mode %03o): %v; want it accepted", tc.perm, tc.mode, err)
		case !tc.ok && !errors.Is(err, filelease.ErrUnsafeDir):
			t.Errorf("New on a directory of mode %04o (file mode %03o): %v; want ErrUnsafeDir", tc.perm, tc.mode, err)
		case !tc.ok && (!strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "can write")):
			t.Errorf("the error does not name the path and the reason: %v", err)
		}
		if s != nil {
			_ = s.Close()
		}
	}
}

// TestSymlinkDirRefused: a symbolic link in place of the directory (to a
// directory or dangling) is refused, and nothing is created where it points.
func TestSymlinkDirRefused(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	for what, target := range map[string]string{"a link to a directory": real, "a dangling link": filepath.Join(base, "missing")} {
		link := filepath.Join(base, "link-"+filepath.Base(target))
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		s, err := filelease.New(link)
		if !errors.Is(err, filelease.ErrUnsafeDir) || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("New on %s: %v, %v; want ErrUnsafeDir naming the path and the link", what, s, err)
		}
		if s != nil {
			_ = s.Close()
		}
	}
	if _, err := os.Lstat(filepath.Join(base, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New created the dangling link's target: %v", err)
	}
	// The directory itself is fine; so is a path through a link above it.
	if err := os.Symlink(base, filepath.Join(base, "up")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{real, filepath.Join(base, "up", "real")} {
		s, err := filelease.New(dir)
		if err != nil {
			t.Errorf("New(%s): %v", dir, err)
			continue
		}
		_ = s.Close()
	}
}

// TestNewCreatesPrivateDir: missing directories are created 0700 (under the
// umask), parents included.
func TestNewCreatesPrivateDir(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "a")
	dir := filepath.Join(parent, "b")
	s := newStore(t, dir)
	for _, d := range []string{parent, s.Dir()} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v, %v; want mode 0700", d, fi, err)
		}
	}
	mustAcquire(t, s, req("k", "h", time.Minute))
	if fi, err := os.Stat(s.File("k")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("lease file: %v, %v; want mode 0600", fi, err)
	}
}
