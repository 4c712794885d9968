//go:build linux

// Release announcements through inotify (lease.Notifier): Release touches the
// lease file's times, which inotify reports on the directory as IN_ATTRIB.

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
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"golang.org/x/sys/unix"
)

// ErrMissed is matched by Next's error when the kernel's inotify queue
// overflowed or the directory's watch ended (the directory was removed or
// unmounted): announcements may have been lost, and the caller should assume
// any key may be free.
var ErrMissed = errors.New("filelease: release announcements were missed")

// watchMask: IN_ATTRIB is what Release's touch produces; acquisitions and
// renewals only write (IN_MODIFY), so they wake no waiter.
const watchMask = unix.IN_ATTRIB | unix.IN_ONLYDIR

// Subscribe opens an inotify watch on the store's directory. It is active
// when Subscribe returns: every Release after that, by any process, is
// delivered. The subscription holds one file descriptor, which Close (or the
// Store's Close) frees; it runs no goroutine: Next waits in Go's network
// poller.
func (s *Store) Subscribe(ctx context.Context) (lease.Subscription, error) {
	if err := s.checkCtx(ctx); err != nil {
		return nil, fmt.Errorf("filelease: subscribe: %w", err)
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("filelease: subscribe: inotify_init1: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, s.dir, watchMask); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("filelease: subscribe: watch %s: %w", s.dir, err)
	}
	f := os.NewFile(uintptr(fd), "inotify:"+s.dir)
	// A non-blocking descriptor joins Go's poller; deadlines prove it did.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("filelease: subscribe: inotify descriptor not pollable: %w", err)
	}
	sub := &subscription{store: s, f: f, buf: make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		_ = f.Close()
		return nil, fmt.Errorf("filelease: subscribe: %w", ErrClosed)
	}
	if s.subs == nil {
		s.subs = make(map[*subscription]struct{})
	}
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	return sub, nil
}

// subscription is the lease.Subscription of a Store.
type subscription struct {
	store  *Store
	f      *os.File
	closed atomic.Bool

	mu      sync.Mutex // serializes Next
	buf     []byte
	pending []lease.Announcement // read but not yet returned
}

var _ lease.Announcer = (*subscription)(nil)

// Next returns the key of the next released lease file, waiting until there
// is one, ctx ends or the subscription is closed.
func (sub *subscription) Next(ctx context.Context) (string, error) {
	a, err := sub.NextAnnouncement(ctx)
	return a.Key, err
}

// NextAnnouncement is Next with the token of the first live waiter in the
// key's queue, read from the lease file when the release is seen (see
// [lease.Announcer]); "" when nobody waits or the file cannot be read.
func (sub *subscription) NextAnnouncement(ctx context.Context) (lease.Announcement, error) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for len(sub.pending) == 0 {
		if sub.closed.Load() {
			return lease.Announcement{}, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return lease.Announcement{}, err
		}
		if err := sub.read(ctx); err != nil {
			return lease.Announcement{}, err
		}
	}
	a := sub.pending[0]
	sub.pending = sub.pending[1:]
	return a, nil
}

// read waits for one batch of inotify events and queues their keys. When ctx
// ends, a past read deadline wakes the blocked read; a deadline left over
// from an earlier call's ctx only makes the caller loop.
func (sub *subscription) read(ctx context.Context) error {
	if err := sub.f.SetReadDeadline(time.Time{}); err != nil {
		return sub.readErr(err)
	}
	stop := context.AfterFunc(ctx, func() { _ = sub.f.SetReadDeadline(time.Unix(1, 0)) })
	n, err := sub.f.Read(sub.buf)
	stop()
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		return sub.readErr(err)
	}
	return sub.parse(sub.buf[:n])
}

func (sub *subscription) readErr(err error) error {
	if sub.closed.Load() || errors.Is(err, os.ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("filelease: subscription: %w", err)
}

// parse queues the keys named by a batch of events, once each.
func (sub *subscription) parse(b []byte) error {
	seen := make(map[string]bool)
	for len(b) >= unix.SizeofInotifyEvent {
		mask := binary.NativeEndian.Uint32(b[4:8])
		nameLen := int(binary.NativeEndian.Uint32(b[12:16]))
		end := unix.SizeofInotifyEvent + nameLen
		if end > len(b) {
			return fmt.Errorf("filelease: subscription: short inotify event")
		}
		name := string(b[unix.SizeofInotifyEvent:end])
		b = b[end:]
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i] // names are NUL-padded
		}
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			return fmt.Errorf("filelease: subscription: inotify queue overflow: %w", ErrMissed)
		case mask&unix.IN_IGNORED != 0:
			return fmt.Errorf("filelease: subscription: the watch on %s ended: %w", sub.store.dir, ErrMissed)
		case mask&unix.IN_ATTRIB == 0 || name == "":
			continue
		}
		key, hashed, ok := keyOf(name)
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		rec, err := sub.store.recordIn(name, hashed)
		if hashed {
			if err != nil {
				return fmt.Errorf("filelease: subscription: %w", err)
			}
			key = rec.Key
		}
		a := lease.Announcement{Key: key}
		if err == nil {
			if now, nerr := monotonicNow(); nerr == nil {
				switch q := rec.liveQueue(now, sub.store.boot); {
				case rec.held(now, sub.store.boot):
					// Taken again since the release (by the waiter that was
					// first): no queued waiter needs to look.
					a.Next = rec.Token
				case len(q) > 0:
					a.Next = q[0].Token
				}
			}
		}
		sub.pending = append(sub.pending, a)
	}
	return nil
}

// recordIn reads the record of the lease file called name (for long keys,
// whose file names hold only their hash, it also tells the key). Unless
// lock, it reads without taking the file's lock (the release that announced
// the key may still hold it): a record torn by a concurrent write fails its
// checksum.
func (s *Store) recordIn(name string, lock bool) (record, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(filepath.Join(s.dir, name), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	})
	if err != nil {
		return record{}, fmt.Errorf("open %s: %w", name, err)
	}
	lf := &leaseFile{fd: fd, path: filepath.Join(s.dir, name)}
	defer lf.close()
	if lock {
		if _, err := lf.flock(unix.LOCK_SH); err != nil {
			return record{}, err
		}
	} else {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return record{}, fmt.Errorf("fstat %s: %w", lf.path, err)
		}
		lf.size = st.Size
	}
	rec, err := lf.readAny()
	if err != nil {
		return record{}, err
	}
	if fileName(rec.Key) != name {
		return record{}, fmt.Errorf("%s: %w", lf.path, corrupt("the file records key %q, which is not its name's", clip(rec.Key)))
	}
	return rec, nil
}

// Close ends the subscription and unblocks Next.
func (sub *subscription) Close() error {
	if sub.closed.Swap(true) {
		return nil
	}
	s := sub.store
	s.mu.Lock()
	delete(s.subs, sub)
	s.mu.Unlock()
	if err := sub.f.Close(); err != nil {
		return fmt.Errorf("filelease: close subscription: %w", err)
	}
	return nil
}
