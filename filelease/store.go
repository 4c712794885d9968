//go:build linux

package filelease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/fifo"
)

// MaxKeyLen is the longest lease key, in bytes, the store accepts.
const MaxKeyLen = lease.MaxKeyLen

// MinTTL is the shortest TTL the store accepts.
const MinTTL = time.Millisecond

// maxTTL keeps CLOCK_MONOTONIC plus a TTL far from overflowing.
const maxTTL = 100 * 365 * 24 * time.Hour

// MaxWaiters is the most live waiters a key's queue holds, and the default of
// [WithMaxWaiters]; it keeps a lease file small.
const MaxWaiters = driver.DefaultMaxWaiters

// DefaultFileMode is the permission of new lease files when WithFileMode is
// not given: only the owner can take leases.
const DefaultFileMode os.FileMode = 0o600

// ErrClosed is returned by Next on a closed Subscription.
var ErrClosed = errors.New("filelease: closed")

var (
	_ driver.Store        = (*Store)(nil)
	_ driver.BatchRenewer = (*Store)(nil)
	_ driver.Notifier     = (*Store)(nil)
)

// Store keeps leases in files of one directory. Every Store and process using
// the same directory on the host shares them. A Store is safe for concurrent
// use, runs no goroutines and keeps no file open between operations.
type Store struct {
	dir        string
	mode       os.FileMode
	maxWaiters int
	boot       string // the running kernel's boot id
}

// Option configures a Store made by [New].
type Option func(*Store)

// WithFileMode sets the permission bits of new lease files (default
// [DefaultFileMode]), and of the directory if New creates it (plus x where r
// is set); the umask applies. Use 0o660 and a shared group so that processes
// of several users exclude each other.
func WithFileMode(mode os.FileMode) Option {
	return func(s *Store) { s.mode = mode.Perm() }
}

// WithMaxWaiters caps each key's queue at n live waiters (1 to [MaxWaiters],
// the default); a queued Acquire of one more fails with a
// *lease.QueueFullError.
func WithMaxWaiters(n int) Option {
	return func(s *Store) { s.maxWaiters = n }
}

// New returns a Store keeping leases in dir, creating it and its parents if
// missing. It refuses with [ErrUnsafeDir] a directory another user could take
// over, and a directory on NFS or SMB (see the package documentation).
func New(dir string, opts ...Option) (*Store, error) {
	s := &Store{mode: DefaultFileMode, maxWaiters: MaxWaiters}
	for _, o := range opts {
		o(s)
	}
	switch {
	case dir == "":
		return nil, fmt.Errorf("filelease: %w", lease.Invalid("directory", "empty path"))
	case s.mode&0o600 != 0o600:
		return nil, fmt.Errorf("filelease: %w", lease.Invalid("file mode", "%v lacks owner read and write", s.mode))
	case s.maxWaiters < 1 || s.maxWaiters > MaxWaiters:
		return nil, fmt.Errorf("filelease: %w", lease.Invalid("max waiters", "%d is not between 1 and %d", s.maxWaiters, MaxWaiters))
	}
	var err error
	if s.dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("filelease: %w", err)
	}
	if err := prepareDir(s.dir, s.mode); err != nil {
		return nil, err
	}
	// The boot id tells leases of this boot from those of earlier ones.
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if s.boot = strings.TrimSpace(string(b)); s.boot == "" {
		return nil, fmt.Errorf("filelease: read boot id: %w", cmp.Or(err, errors.New("empty")))
	}
	return s, nil
}

// Dir returns the absolute path of the store's directory.
func (s *Store) Dir() string { return s.dir }

// File returns the path of key's lease file (which may not exist yet), always
// inside Dir.
func (s *Store) File(key string) string { return filepath.Join(s.dir, fileName(key)) }

// Caps reports a FIFO store with keys of at most MaxKeyLen bytes and TTLs of
// at least MinTTL.
func (s *Store) Caps() driver.Caps {
	return driver.Caps{MinTTL: MinTTL, MaxTTL: maxTTL, MaxKeyLen: MaxKeyLen, FIFO: true, MaxWaiters: s.maxWaiters}
}

// Close does nothing: a Store holds no resources between operations, and
// leases stay in their files.
func (s *Store) Close() error { return nil }

// do runs op on key's file, locked by mode (see lock), at the clock's time.
func (s *Store) do(ctx context.Context, name, key string, mode openMode, op func(lf *leaseFile, now int64) error) error {
	err := ctx.Err()
	var lf *leaseFile
	if err == nil {
		lf, err = s.lock(key, mode)
	}
	if err == nil && lf != nil {
		defer lf.close()
		err = op(lf, monotonicNow())
	}
	if err != nil && !errors.As(err, new(*lease.HeldError)) {
		return fmt.Errorf("filelease: %s %q: %w", name, key, err)
	}
	return err
}

// Acquire takes r.Key for r.Token if the key is free or expired and no live
// waiter is queued ahead of r.Token, with the file's fence + 1; if r.Token
// holds it already, it refreshes the TTL and keeps the fence.
func (s *Store) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	var g driver.Grant
	err := s.do(ctx, "acquire", r.Key, modeCreate, func(lf *leaseFile, now int64) (err error) {
		g.Fence, err = s.acquire(lf, r, now)
		return err
	})
	return g, err
}

func (s *Store) acquire(lf *leaseFile, r driver.Request, now int64) (uint64, error) {
	rec := lf.rec
	q := rec.liveQueue(now, s.boot)
	expires := now + int64(r.TTL)
	held := rec.held(now, s.boot)
	if held && rec.Token == r.Token {
		rec.Holder, rec.Expires = r.Holder, expires
		return rec.Fence, lf.write(rec.withQueue(q, s.boot), false)
	}
	if ahead := fifo.Ahead(q, r.Token); held || ahead > 0 {
		var err error
		if r.Queue {
			q, err = fifo.Enqueue(q, r.Key, fifo.Waiter{Token: r.Token, Expires: expires}, s.maxWaiters)
		}
		if err == nil {
			err = lf.write(rec.withQueue(q, s.boot), false) // also drops expired waiters
		}
		if err != nil {
			return 0, err
		}
		refused := &lease.HeldError{Key: r.Key, Queued: ahead}
		if held {
			refused.Holder, refused.Fence, refused.Remaining = rec.Holder, rec.Fence, time.Duration(rec.Expires-now)
		}
		return 0, refused
	}
	if rec.Fence == math.MaxUint64 {
		return 0, fmt.Errorf("fence exhausted at %d", rec.Fence)
	}
	q, _ = fifo.Dequeue(q, r.Token)
	rec = record{Key: r.Key, Fence: rec.Fence + 1, Token: r.Token, Holder: r.Holder, Boot: s.boot, Expires: expires}
	return rec.Fence, lf.write(rec.withQueue(q, s.boot), true)
}

// Renew extends r.Key to r.TTL from now if r.Token still holds it.
func (s *Store) Renew(ctx context.Context, r driver.Request) error {
	return s.do(ctx, "renew", r.Key, modeWrite, func(lf *leaseFile, now int64) error {
		rec := lf.rec
		if !rec.held(now, s.boot) || rec.Token != r.Token {
			return lease.ErrNotHeld
		}
		rec.Expires = now + int64(r.TTL)
		return lf.write(rec, false)
	})
}

// RenewMany renews each of rs in turn, as Renew does: a file store has no
// round trip to save, but one call per renew interval spares the Client a
// call (and a worker's wake-up) per lease.
func (s *Store) RenewMany(ctx context.Context, rs []driver.Request) []error {
	errs := make([]error, len(rs))
	for i, r := range rs {
		errs[i] = s.Renew(ctx, r)
	}
	return errs
}

// Release frees r.Key if r.Token holds it, keeping its fence, and takes
// r.Token out of the key's queue. It announces the key (touches the file)
// when it frees it, or when it dequeues a waiter of a free key: the next
// waiter may now be first.
func (s *Store) Release(ctx context.Context, r driver.Request) error {
	return s.do(ctx, "release", r.Key, modeWrite, func(lf *leaseFile, now int64) error {
		rec := lf.rec
		q, dequeued := fifo.Dequeue(rec.liveQueue(now, s.boot), r.Token)
		mine := rec.held(now, s.boot) && rec.Token == r.Token
		if mine {
			rec = record{Key: rec.Key, Fence: rec.Fence}
		}
		if err := lf.write(rec.withQueue(q, s.boot), false); err != nil {
			return err
		}
		if mine || dequeued && !rec.held(now, s.boot) {
			_ = lf.touch() // the key is free already; a lost announcement only delays waiters
		}
		if !mine {
			return lease.ErrNotHeld
		}
		return nil
	})
}

// Inspect reports who holds key. For a free key, Info.Fence is the last fence
// granted for it (0 if none was).
func (s *Store) Inspect(ctx context.Context, key string) (info driver.Info, err error) {
	info.Key = key
	err = s.do(ctx, "inspect", key, modeRead, func(lf *leaseFile, now int64) error {
		if rec := lf.rec; !rec.held(now, s.boot) {
			info.Fence = rec.Fence
		} else {
			info = driver.Info{Key: key, Held: true, Holder: rec.Holder, Fence: rec.Fence, Remaining: time.Duration(rec.Expires - now)}
		}
		return nil
	})
	return info, err
}
