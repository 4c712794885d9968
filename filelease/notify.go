//go:build linux

// Release announcements (driver.Notifier): Release touches the lease file,
// which inotify reports on the directory as IN_ATTRIB. Acquisitions and
// renewals only write (IN_MODIFY), so they wake nobody.

package filelease

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/lease/driver"
	"golang.org/x/sys/unix"
)

// Subscribe watches the store's directory with inotify: every Release after
// it returns, by any process, is announced. The subscription holds one file
// descriptor and runs no goroutine: Next waits in Go's poller.
func (s *Store) Subscribe(ctx context.Context) (driver.Subscription, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("filelease: subscribe: inotify_init1: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inotify:"+s.dir)
	if _, err := unix.InotifyAddWatch(fd, s.dir, unix.IN_ATTRIB|unix.IN_ONLYDIR); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("filelease: subscribe: watch %s: %w", s.dir, err)
	}
	return &subscription{s: s, f: f, buf: make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))}, nil
}

type subscription struct {
	s       *Store
	f       *os.File
	mu      sync.Mutex // serializes Next
	buf     []byte
	pending []driver.Announcement // read, not yet returned
}

// Next returns the next announcement. Its Next is the key's next holder (see
// record.next), as the file says.
func (sub *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for len(sub.pending) == 0 {
		if err := ctx.Err(); err != nil {
			return driver.Announcement{}, err
		}
		// When ctx ends, a past deadline wakes the read; one left by an
		// earlier ctx is cleared first.
		_ = sub.f.SetReadDeadline(time.Time{})
		stop := context.AfterFunc(ctx, func() { _ = sub.f.SetReadDeadline(time.Unix(1, 0)) })
		n, err := sub.f.Read(sub.buf)
		stop()
		if errors.Is(err, os.ErrClosed) {
			return driver.Announcement{}, ErrClosed
		}
		if err == nil {
			err = sub.parse(sub.buf[:n])
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return driver.Announcement{}, fmt.Errorf("filelease: subscription: %w", err)
		}
	}
	a := sub.pending[0]
	sub.pending = sub.pending[1:]
	return a, nil
}

// parse queues the announcements of a batch of inotify events.
func (sub *subscription) parse(b []byte) error {
	for len(b) >= unix.SizeofInotifyEvent {
		mask := binary.NativeEndian.Uint32(b[4:])
		end := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:]))
		if end > len(b) {
			return errors.New("short inotify event")
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:end]), "\x00")
		b = b[end:]
		if mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED) != 0 {
			return errors.New("announcements were lost (inotify queue overflow, or the watch ended)")
		}
		if !strings.HasSuffix(name, Suffix) {
			continue
		}
		rec, err := sub.s.peek(name) // names of long keys hold only their hash
		if err != nil {
			return err // the Client wakes every waiter
		}
		sub.pending = append(sub.pending, driver.Announcement{Key: rec.Key, Next: rec.next(monotonicNow(), sub.s.boot)})
	}
	return nil
}

// peek reads the record of the lease file called name under a shared lock,
// which waits for the announcing Release to close the file.
func (s *Store) peek(name string) (record, error) {
	lf, err := open(filepath.Join(s.dir, name), modeRead)
	if err != nil {
		return record{}, err
	}
	lf.close()
	if fileName(lf.rec.Key) != name {
		return record{}, corrupt("%s records key %.40q", name, lf.rec.Key)
	}
	return lf.rec, nil
}

// Close ends the subscription and unblocks Next.
func (sub *subscription) Close() error { return sub.f.Close() }
