//go:build linux

// Lease files on disk: open and flock one, read its record, write a new one
// in place; and the host's monotonic clock and boot id.

package filelease

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// bootIDPath is where Linux publishes the random id of the current boot.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// readBootID returns the id of the running kernel's boot.
func readBootID() (string, error) {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("read boot id: %s is empty", bootIDPath)
	}
	return id, nil
}

// monotonicNow reads CLOCK_MONOTONIC in nanoseconds: the clock of Go's
// timers and of time.Now's monotonic reading, shared by every process of the
// host and never stepped by wall-clock changes.
func monotonicNow() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("clock_gettime(CLOCK_MONOTONIC): %w", err)
	}
	return ts.Nano(), nil
}

// openMode says how to open a lease file.
type openMode int

const (
	modeRead   openMode = iota // shared lock, read only; a missing file is free
	modeWrite                  // exclusive lock; a missing file is free
	modeCreate                 // exclusive lock; create the file if missing
)

// maxReopen bounds how often a file that was replaced while we waited for
// its lock (someone deleted it by hand) is opened again.
const maxReopen = 3

// leaseFile is an open, locked lease file and the record it held when locked.
type leaseFile struct {
	fd   int
	path string
	size int64
	rec  record
}

// lock opens key's file in dir and locks it (shared for modeRead, exclusive
// otherwise) until close. It returns nil, nil when the file does not exist
// and mode is not modeCreate; modeCreate creates it (see create). A file that
// does not parse (an empty one included), or records another key, is closed
// and reported with an error matching ErrCorrupt.
//
// flock blocks until the lock is free. Every holder of the lock keeps it only
// for the few system calls of one operation, so the wait is short unless a
// process is stopped in the middle of one.
func lock(dir, key string, mode openMode, perm os.FileMode) (*leaseFile, error) {
	path := filepath.Join(dir, fileName(key))
	flags := unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_RDWR
	how := unix.LOCK_EX
	if mode == modeRead {
		flags = unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_RDONLY
		how = unix.LOCK_SH
	}
	for attempt := 1; ; attempt++ {
		fd, err := retryEINTR(func() (int, error) { return unix.Open(path, flags, 0) })
		if errors.Is(err, unix.ENOENT) {
			if mode != modeCreate {
				return nil, nil
			}
			if err := create(path, key, perm); err != nil {
				return nil, err
			}
			fd, err = retryEINTR(func() (int, error) { return unix.Open(path, flags, 0) })
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		lf := &leaseFile{fd: fd, path: path}
		same, err := lf.flock(how)
		if err != nil {
			lf.close()
			return nil, err
		}
		if !same {
			// The file was removed or replaced while we waited for its
			// lock: its lock no longer guards the path.
			lf.close()
			if attempt < maxReopen {
				continue
			}
			return nil, fmt.Errorf("%s keeps being replaced while it is locked", path)
		}
		if err := lf.read(key); err != nil {
			lf.close()
			return nil, err
		}
		return lf, nil
	}
}

// flock locks the file and reports whether the path still names it.
func (lf *leaseFile) flock(how int) (bool, error) {
	if _, err := retryEINTR(func() (int, error) { return 0, unix.Flock(lf.fd, how) }); err != nil {
		return false, fmt.Errorf("flock %s: %w", lf.path, err)
	}
	var fst, pst unix.Stat_t
	if err := unix.Fstat(lf.fd, &fst); err != nil {
		return false, fmt.Errorf("fstat %s: %w", lf.path, err)
	}
	if err := unix.Lstat(lf.path, &pst); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("stat %s: %w", lf.path, err)
	}
	if fst.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, fmt.Errorf("%s is not a regular file", lf.path)
	}
	lf.size = fst.Size
	return fst.Dev == pst.Dev && fst.Ino == pst.Ino, nil
}

// read loads the file's record, which must be key's.
func (lf *leaseFile) read(key string) error {
	rec, err := lf.readAny()
	if err != nil {
		return err
	}
	if rec.Key != key {
		return fmt.Errorf("%s: %w", lf.path, corrupt("the file records key %q, not %q", clip(rec.Key), clip(key)))
	}
	lf.rec = rec
	return nil
}

// readAny parses the file's record, whatever key it records. It reads the
// file through a buffer, however long it is (see parse).
func (lf *leaseFile) readAny() (record, error) {
	if lf.size == 0 {
		return record{}, fmt.Errorf("%s: %w", lf.path, corrupt("empty file (lease files are created whole, never empty)"))
	}
	// A buffer of the file's size (a few hundred bytes, usually) reads it
	// in one pread; longer lines are read in 64 KiB pieces.
	buf := int(min(lf.size, 64<<10))
	rec, err := parse(bufio.NewReaderSize(io.NewSectionReader(fdReader(lf.fd), 0, lf.size), buf))
	if err != nil {
		return record{}, fmt.Errorf("%s: %w", lf.path, err)
	}
	return rec, nil
}

// fdReader reads a file descriptor at offsets (pread).
type fdReader int

func (fd fdReader) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := retryEINTR(func() (int, error) { return unix.Pread(int(fd), b[n:], off+int64(n)) })
		if err != nil {
			return n, fmt.Errorf("read: %w", err)
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// write replaces the file's record in place (the file keeps its identity, so
// its lock stays valid): the new record is written from offset 0, then the
// file is cut to its length. A write that is torn fails the checksum and is
// reported as corrupt, never read as a free key. With sync, the data is on
// disk before write returns.
func (lf *leaseFile) write(rec record, sync bool) error {
	data := rec.encode()
	for n := 0; n < len(data); {
		m, err := retryEINTR(func() (int, error) { return unix.Pwrite(lf.fd, data[n:], int64(n)) })
		if err != nil {
			return fmt.Errorf("write %s: %w", lf.path, err)
		}
		n += m
	}
	if lf.size > int64(len(data)) {
		if _, err := retryEINTR(func() (int, error) { return 0, unix.Ftruncate(lf.fd, int64(len(data))) }); err != nil {
			return fmt.Errorf("truncate %s: %w", lf.path, err)
		}
	}
	lf.size = int64(len(data))
	if sync {
		if _, err := retryEINTR(func() (int, error) { return 0, unix.Fdatasync(lf.fd) }); err != nil {
			return fmt.Errorf("fdatasync %s: %w", lf.path, err)
		}
	}
	lf.rec = rec
	return nil
}

// touch sets the file's times to now, which inotify reports as IN_ATTRIB:
// Release's announcement. Write permission on the file suffices.
func (lf *leaseFile) touch() error {
	// futimens(fd, NULL): utimensat with a NULL path operates on fd.
	if _, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(lf.fd), 0, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("futimens %s: %w", lf.path, errno)
	}
	return nil
}

// close unlocks and closes the file.
func (lf *leaseFile) close() {
	_ = unix.Close(lf.fd) // closing the last descriptor releases the flock
}

// create makes key's lease file at path, holding a free record with fence 0,
// unless it exists already. The record is written and synced to a temporary
// file first, which is then linked to path: a lease file is never seen
// empty or half-written, so an empty lease file is always corruption.
func create(path, key string, perm os.FileMode) error {
	dir := filepath.Dir(path)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // never fails
	tmp := filepath.Join(dir, "."+hex.EncodeToString(rnd[:])+".tmp")
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, uint32(perm.Perm()))
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	defer func() { _ = unix.Unlink(tmp) }()
	lf := &leaseFile{fd: fd, path: tmp}
	err = lf.write(record{Key: key}, true)
	lf.close()
	if err != nil {
		return err
	}
	if err := unix.Link(tmp, path); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("link %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir makes a new directory entry durable.
func syncDir(dir string) error {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// retryEINTR runs a system call again when a signal interrupted it.
func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}
