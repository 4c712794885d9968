//go:build linux

// Package filefence makes a write to a file on the local disk conditional on
// a lease's fence. The largest fence the file accepted is kept beside it, in
// FenceFile(name), which is also the lock every WriteFile of name takes:
//
//	err := filefence.WriteFile("/var/lib/app/state.json", l.Fence(), data, 0o644)
//	// errors.Is(err, lease.ErrStaleFence): a newer holder has written.
//
// Readers read the file as usual: it is replaced by a rename, so they see
// the old content or the new, whole. The lock is flock(2): it serializes
// the processes of one host, not those of hosts sharing a network file
// system. Why this is atomic: docs/design.md, "Fenced writes".
package filefence

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/leasekit/lease"
)

// FenceFile returns the file that keeps name's fence: name + ".fence".
// Leave it in place: removing it would forget the fence.
func FenceFile(name string) string { return name + ".fence" }

// WriteFile writes data to name as os.WriteFile does, but through a
// temporary file renamed over name, and only if the fence in FenceFile(name)
// is at most fence: else it writes nothing and returns a
// *lease.StaleFenceError (matching lease.ErrStaleFence). It holds an
// exclusive flock on the fence file throughout and records fence there
// (fsynced) before the rename.
func WriteFile(name string, fence uint64, data []byte, perm fs.FileMode) error {
	lock, err := os.OpenFile(FenceFile(name), os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return fmt.Errorf("filefence: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("filefence: lock %s: %w", lock.Name(), err)
	}
	stored, err := readFence(lock)
	switch {
	case err != nil:
		return err
	case stored > fence:
		return fmt.Errorf("filefence: %w", &lease.StaleFenceError{Resource: "file " + name, Fence: fence, Stored: stored})
	}
	tmp, err := writeTemp(name, data, perm)
	if err != nil {
		return err
	}
	if err := recordFence(lock, fence); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("filefence: %w", err)
	}
	return syncDir(filepath.Dir(name))
}

// readFence reads the fence file's "%020d\n" record; 0 if it is empty.
func readFence(f *os.File) (uint64, error) {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	s := strings.TrimSpace(string(buf[:n]))
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("filefence: %s holds %q, not a fence", f.Name(), s)
	}
	return v, nil
}

// recordFence overwrites the record with one pwrite of fixed width and
// fsyncs it.
func recordFence(f *os.File, fence uint64) error {
	if _, err := f.WriteAt(fmt.Appendf(nil, "%020d\n", fence), 0); err != nil {
		return fmt.Errorf("filefence: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("filefence: %w", err)
	}
	return nil
}

// writeTemp writes data, fsynced, to a new file beside name and returns its
// path.
func writeTemp(name string, data []byte, perm fs.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".tmp*")
	if err != nil {
		return "", fmt.Errorf("filefence: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("filefence: %w", err)
	}
	return f.Name(), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("filefence: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("filefence: sync %s: %w", dir, err)
	}
	return nil
}
