//go:build linux

// Lease files on disk and the host's monotonic clock.

package filelease

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/leasekit/lease"
	"golang.org/x/sys/unix"
)

// monotonicNow reads CLOCK_MONOTONIC in nanoseconds: shared by every process
// of the host, never stepped, and the clock of Go's timers.
func monotonicNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail on Linux
	return ts.Nano()
}

// openMode says how to open a lease file.
type openMode int

const (
	modeRead   openMode = iota // shared lock; a missing file is free (nil, nil)
	modeWrite                  // exclusive lock; a missing file is lease.ErrNotHeld
	modeCreate                 // exclusive lock; a missing file is created
)

// leaseFile is an open, locked lease file, its size and its record.
type leaseFile struct {
	f    *os.File
	size int64
	rec  record
}

// lock opens key's file, locks it until close and reads its record, which
// must be key's. flock waits for a lock held by another operation: for a few
// system calls, unless its process is stopped in the middle of one.
func (s *Store) lock(key string, mode openMode) (*leaseFile, error) {
	path := s.File(key)
	lf, err := open(path, mode)
	if errors.Is(err, fs.ErrNotExist) && mode == modeCreate {
		if err = s.create(path, key); err == nil {
			lf, err = open(path, mode)
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) && mode == modeRead:
		return nil, nil
	case errors.Is(err, fs.ErrNotExist) && mode == modeWrite:
		return nil, lease.ErrNotHeld
	case err == nil && lf.rec.Key != key:
		lf.close()
		return nil, fmt.Errorf("%s: %w", path, corrupt("the file records key %.40q", lf.rec.Key))
	}
	return lf, err
}

// open opens the lease file at path, locks it (shared for modeRead) and
// reads its record. A file replaced by hand while we waited for its lock is
// refused: its lock no longer guards the path.
func open(path string, mode openMode) (*leaseFile, error) {
	flags, how := os.O_RDWR|unix.O_NOFOLLOW, unix.LOCK_EX
	if mode == modeRead {
		flags, how = os.O_RDONLY|unix.O_NOFOLLOW, unix.LOCK_SH
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, err
	}
	lf := &leaseFile{f: f}
	var fi, pi os.FileInfo
	if err = unix.Flock(int(f.Fd()), how); err == nil { // Go's SA_RESTART: no EINTR
		fi, err = f.Stat()
	}
	if err == nil {
		pi, err = os.Lstat(path)
	}
	if err == nil && !os.SameFile(fi, pi) {
		err = errors.New("replaced while we waited for its lock")
	}
	if err == nil { // a record longer than maxFile has no checksum line there
		data := make([]byte, min(fi.Size(), maxFile))
		if _, err = io.ReadFull(f, data); err == nil {
			lf.size = fi.Size()
			lf.rec, err = parse(data)
		}
	}
	if err != nil {
		lf.close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return lf, nil
}

// write replaces the record in place (the file keeps its identity, so its
// lock stays valid) and cuts the file to its length. A torn write fails the
// checksum: corrupt, never free. With sync the data is on disk on return. A
// record too long to be read back (thousands of readers) is not written.
func (lf *leaseFile) write(rec record, sync bool) error {
	data := rec.encode()
	if len(data) > maxFile {
		return fmt.Errorf("a record of %d bytes, over %d: too many readers", len(data), maxFile)
	}
	if _, err := lf.f.WriteAt(data, 0); err != nil {
		return err
	}
	if lf.size > int64(len(data)) {
		if err := lf.f.Truncate(int64(len(data))); err != nil {
			return err
		}
	}
	lf.size = int64(len(data))
	if sync {
		if err := unix.Fdatasync(int(lf.f.Fd())); err != nil {
			return fmt.Errorf("fdatasync %s: %w", lf.f.Name(), err)
		}
	}
	return nil
}

// touch sets the file's times to now, which inotify reports as IN_ATTRIB:
// the release announcement.
func (lf *leaseFile) touch() error {
	// futimens(fd, NULL): utimensat with a NULL path works on fd.
	if _, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, lf.f.Fd(), 0, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("futimens %s: %w", lf.f.Name(), errno)
	}
	return nil
}

// close unlocks and closes the file.
func (lf *leaseFile) close() { _ = lf.f.Close() }

// create makes key's file at path, with a free record of fence 0, unless it
// exists. The record is synced in a temporary file first, which is then
// linked to path, so a lease file is never empty or half-written.
func (s *Store) create(path, key string) error {
	tmp := filepath.Join(s.dir, fmt.Sprintf(".%016x.tmp", rand.Uint64()))
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, s.mode)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer f.Close()
	if err := (&leaseFile{f: f}).write(record{Key: key}, true); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync() // the new name is durable
}
