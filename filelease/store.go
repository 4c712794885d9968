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
	"slices"
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

// Caps reports a FIFO store of shared holds with keys of at most MaxKeyLen
// bytes and TTLs of at least MinTTL.
func (s *Store) Caps() driver.Caps {
	return driver.Caps{MinTTL: MinTTL, MaxTTL: maxTTL, MaxKeyLen: MaxKeyLen, FIFO: true, MaxWaiters: s.maxWaiters, Shared: true}
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

// Acquire takes r.Key for r.Token if no live holder or waiter is in the way
// (see package driver): an exclusive grant gets the file's fence + 1, a
// shared one the fence of the readers it joins, or the file's fence + 1 if
// none is live. If r.Token holds it already, it refreshes the TTL and keeps
// the fence.
func (s *Store) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	var g driver.Grant
	err := s.do(ctx, "acquire", r.Key, modeCreate, func(lf *leaseFile, now int64) (err error) {
		g.Fence, err = s.acquire(lf, r, now)
		return err
	})
	return g, err
}

func (s *Store) acquire(lf *leaseFile, r driver.Request, now int64) (uint64, error) {
	rec := lf.rec.live(now, s.boot)
	expires := now + int64(r.TTL)
	held, i := rec.held(now, s.boot), readerIndex(rec.Readers, r.Token)
	switch {
	case held && rec.Token == r.Token: // a retried Acquire, of either kind
		rec.Holder, rec.Expires = r.Holder, expires
		return rec.Fence, lf.write(rec, false)
	case i < len(rec.Readers): // whoever waits
		rec.Readers[i].Holder, rec.Readers[i].Expires = r.Holder, expires
		return rec.Fence, lf.write(rec, false)
	}
	ahead := fifo.Ahead(rec.Queue, r.Token)
	if held || r.Shared && fifo.WritersAhead(rec.Queue, r.Token) > 0 || !r.Shared && (len(rec.Readers) > 0 || ahead > 0) {
		var err error
		if r.Queue {
			rec.Queue, err = fifo.Enqueue(rec.Queue, r.Key, fifo.Waiter{Token: r.Token, Expires: expires, Shared: r.Shared}, s.maxWaiters)
		}
		if err == nil {
			err = lf.write(rec, false) // also drops expired waiters and readers
		}
		if err != nil {
			return 0, err
		}
		refused := &lease.HeldError{Key: r.Key, Queued: ahead}
		if info := rec.info(r.Key, now, s.boot); info.Held {
			refused.Holder, refused.Fence, refused.Remaining = info.Holder, info.Fence, info.Remaining
		}
		return 0, refused
	}
	fence := rec.Fence
	if !r.Shared || len(rec.Readers) == 0 { // a new epoch
		if fence == math.MaxUint64 {
			return 0, fmt.Errorf("fence exhausted at %d", fence)
		}
		fence++
	}
	q, _ := fifo.Dequeue(rec.Queue, r.Token)
	grant := record{Key: r.Key, Fence: fence, Boot: s.boot, QueueBoot: s.boot, Queue: q, Broken: rec.Broken}
	if r.Shared {
		grant.Readers = append(rec.Readers, reader{Token: r.Token, Holder: r.Holder, Expires: expires})
	} else {
		grant.Token, grant.Holder, grant.Expires = r.Token, r.Holder, expires
	}
	return fence, lf.write(grant, fence != rec.Fence)
}

// Renew extends r.Key to r.TTL from now if r.Token still holds it, as its
// writer or one of its readers. A token a Break evicted gets lease.ErrBroken.
func (s *Store) Renew(ctx context.Context, r driver.Request) error {
	return s.do(ctx, "renew", r.Key, modeWrite, func(lf *leaseFile, now int64) error {
		rec := lf.rec.live(now, s.boot)
		switch i := readerIndex(rec.Readers, r.Token); {
		case i < len(rec.Readers):
			rec.Readers[i].Expires = now + int64(r.TTL)
		case rec.broken(r.Token):
			return lease.ErrBroken
		case !rec.held(now, s.boot) || rec.Token != r.Token:
			return lease.ErrNotHeld
		default:
			rec.Expires = now + int64(r.TTL)
		}
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

// Release frees r.Key if r.Token holds it, as its writer or one of its
// readers, keeping its fence, and takes r.Token out of the key's queue. It announces the key
// (touches the file) when it frees it, or when it dequeues a waiter of a key
// no writer holds: the next waiters may now be first, or join the readers.
func (s *Store) Release(ctx context.Context, r driver.Request) error {
	return s.do(ctx, "release", r.Key, modeWrite, func(lf *leaseFile, now int64) error {
		rec := lf.rec.live(now, s.boot)
		var dequeued bool
		rec.Queue, dequeued = fifo.Dequeue(rec.Queue, r.Token)
		i := readerIndex(rec.Readers, r.Token)
		mine := i < len(rec.Readers) || rec.held(now, s.boot) && rec.Token == r.Token
		switch {
		case i < len(rec.Readers):
			rec.Readers = slices.Delete(rec.Readers, i, i+1)
		case mine:
			rec = record{Key: rec.Key, Fence: rec.Fence, QueueBoot: s.boot, Queue: rec.Queue, Broken: rec.Broken}
		}
		if err := lf.write(rec, false); err != nil {
			return err
		}
		if !rec.held(now, s.boot) && (mine && len(rec.Readers) == 0 || dequeued) {
			_ = lf.touch() // the record is written: a lost announcement only delays waiters
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
		info = lf.rec.info(key, now, s.boot)
		return nil
	})
	return info, err
}

// info describes r's live holder at now of boot: its writer, or the reader
// that expires last. A free key's keeps the last fence.
func (r record) info(key string, now int64, boot string) driver.Info {
	info := driver.Info{Key: key, Fence: r.Fence}
	if rs := r.live(now, boot).Readers; len(rs) > 0 {
		last := slices.MaxFunc(rs, func(a, b reader) int { return cmp.Compare(a.Expires, b.Expires) })
		info.Held, info.Shared, info.Readers, info.Holder, info.Remaining = true, true, len(rs), last.Holder, time.Duration(last.Expires-now)
	} else if r.held(now, boot) {
		info.Held, info.Holder, info.Remaining = true, r.Holder, time.Duration(r.Expires-now)
	}
	return info
}

// readerIndex returns the index of token's entry in rs, or len(rs).
func readerIndex(rs []reader, token string) int {
	if i := slices.IndexFunc(rs, func(rd reader) bool { return rd.Token == token }); i >= 0 {
		return i
	}
	return len(rs)
}
