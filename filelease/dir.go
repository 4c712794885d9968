//go:build linux

// The store's directory: created private, and refused when another user
// could take it over.

package filelease

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/leasekit/lease"
	"golang.org/x/sys/unix"
)

// ErrUnsafeDir is matched by the error of New for a directory that another
// user could take over: one owned by a user other than the process's (or
// root), writable by its group or by everyone (unless WithFileMode shares
// the leases that widely), or a symbolic link. Whoever controls the
// directory can read every holder's token, replace lease files and so grant
// a key to a second holder. The message names the path and the reason.
var ErrUnsafeDir = errors.New("filelease: unsafe directory")

func unsafeDir(dir, format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrUnsafeDir, dir, fmt.Sprintf(format, args...))
}

// prepareDir creates dir and its missing parents with dirMode(mode) (0700 by
// default) and checks that no other user can take it over (see
// ErrUnsafeDir). mode is the lease files' mode: group or world write
// permission on the directory is accepted only if mode grants it too, and a
// directory of another user only if mode shares the files with a group the
// directory belongs to and the process is in.
func prepareDir(dir string, mode os.FileMode) error {
	fi, err := os.Lstat(dir)
	switch {
	case err == nil && fi.Mode()&os.ModeSymlink != 0:
		return unsafeDir(dir, "is a symbolic link; give the directory itself")
	case err == nil && !fi.IsDir():
		return fmt.Errorf("filelease: %w", lease.Invalid("directory", "%s is not a directory", dir))
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("filelease: %w", err)
	}
	if err := os.MkdirAll(dir, dirMode(mode)); err != nil {
		return fmt.Errorf("filelease: create directory: %w", err)
	}
	// Opened without following a link, so that what is checked is what was
	// created or found, even if the path was swapped since.
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if errors.Is(err, unix.ELOOP) {
		return unsafeDir(dir, "is a symbolic link; give the directory itself")
	}
	if err != nil {
		return fmt.Errorf("filelease: open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("filelease: fstat %s: %w", dir, err)
	}
	perm := st.Mode & 0o7777
	uid := uint32(os.Geteuid())
	if st.Uid != uid && st.Uid != 0 && !(mode&0o020 != 0 && inGroup(st.Gid)) {
		return unsafeDir(dir, "owned by uid %d, not by this process's user (uid %d) or root; "+
			"that user can read the lease tokens and replace the files", st.Uid, uid)
	}
	if perm&0o002 != 0 && mode&0o002 == 0 {
		return unsafeDir(dir, "mode %04o: every user can write to it (make it 0700)", perm)
	}
	if perm&0o020 != 0 && mode&0o020 == 0 {
		return unsafeDir(dir, "mode %04o: its group can write to it (make it 0700, or share the "+
			"leases with the group with WithFileMode(0o660))", perm)
	}
	return nil
}

// inGroup reports whether the process is in group gid.
func inGroup(gid uint32) bool {
	if uint32(os.Getegid()) == gid {
		return true
	}
	groups, err := unix.Getgroups()
	return err == nil && slices.Contains(groups, int(gid))
}
