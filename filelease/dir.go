//go:build linux

// The store's directory: created private, refused when another user could
// take it over or when it is not on a local file system.

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
// user could take over: a symbolic link, one owned by a user other than the
// process's (or root), or one its group or everyone can write to (unless
// WithFileMode shares the leases that widely). Whoever controls the directory
// can read every holder's token and replace lease files. The message names
// the path and the reason.
var ErrUnsafeDir = errors.New("filelease: unsafe directory")

func unsafeDir(dir, format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrUnsafeDir, dir, fmt.Sprintf(format, args...))
}

// prepareDir creates dir and its missing parents with mode plus x where r is
// set (0700 by default), and checks the directory (see ErrUnsafeDir). mode
// is the lease files': group or world write permission on the directory is
// accepted only if mode grants it too, and another user's directory only if
// mode shares the files with its group, which the process is in.
func prepareDir(dir string, mode os.FileMode) error {
	fi, err := os.Lstat(dir)
	switch {
	case err == nil && fi.Mode()&os.ModeSymlink != 0:
		return unsafeDir(dir, "is a symbolic link; give the directory itself")
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("filelease: %w", err)
	}
	if err := os.MkdirAll(dir, mode|(mode&0o444)>>2); err != nil {
		return fmt.Errorf("filelease: create directory: %w", err)
	}
	// What is checked is what was opened, even if the path was swapped since.
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("filelease: %w", err)
	}
	defer d.Close()
	var st unix.Stat_t
	var fs unix.Statfs_t
	if err := errors.Join(unix.Fstat(int(d.Fd()), &st), unix.Fstatfs(int(d.Fd()), &fs)); err != nil {
		return fmt.Errorf("filelease: stat %s: %w", dir, err)
	}
	perm, uid := st.Mode&0o7777, uint32(os.Geteuid())
	switch {
	case st.Uid != uid && st.Uid != 0 && !(mode&0o020 != 0 && inGroup(st.Gid)):
		return unsafeDir(dir, "owned by uid %d, not by this process's user (uid %d) or root; "+
			"that user can read the lease tokens and replace the files", st.Uid, uid)
	case perm&0o002 != 0 && mode&0o002 == 0:
		return unsafeDir(dir, "mode %04o: every user can write to it (make it 0700)", perm)
	case perm&0o020 != 0 && mode&0o020 == 0:
		return unsafeDir(dir, "mode %04o: its group can write to it (make it 0700, or share the "+
			"leases with the group with WithFileMode(0o660))", perm)
	case slices.Contains([]int64{unix.NFS_SUPER_MAGIC, unix.SMB_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC, unix.CIFS_SUPER_MAGIC}, int64(fs.Type)):
		// flock, the clock and the boot id are not shared across hosts.
		return fmt.Errorf("filelease: %w", lease.Invalid("directory", "%s is on NFS or SMB; the file store is host-local", dir))
	}
	return nil
}

// inGroup reports whether the process is in group gid.
func inGroup(gid uint32) bool {
	groups, err := unix.Getgroups()
	return uint32(os.Getegid()) == gid || err == nil && slices.Contains(groups, int(gid))
}
