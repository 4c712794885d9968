//go:build linux

// Store: construction, validation and the single-lease operations.

package filelease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/fifo"
	"golang.org/x/sys/unix"
)

// MaxKeyLen is the longest lease key, in bytes, the store accepts.
const MaxKeyLen = lease.MaxKeyLen

// MinTTL is the shortest TTL the store accepts. Expiry is judged to the
// nanosecond, but TTLs below the Client's own minimum make no sense.
const MinTTL = time.Millisecond

// ErrClosed is returned (wrapped) by operations on a closed Store and by Next
// on a closed Subscription.
var ErrClosed = errors.New("filelease: closed")

var (
	_ lease.Store    = (*Store)(nil)
	_ lease.Notifier = (*Store)(nil)
	_ lease.Limiter  = (*Store)(nil)
)

// Store keeps leases in files of one directory, one file per key. Every
// process (and every Store) using the same directory on the same host shares
// the leases. A Store is safe for concurrent use; it runs no goroutines and
// keeps no file open between operations.
type Store struct {
	dir        string
	mode       os.FileMode
	boot       string
	maxWaiters int // WithMaxWaiters

	closed atomic.Bool
	mu     sync.Mutex
	subs   map[*subscription]struct{}
}

// New returns a Store keeping leases in dir, which it creates (with its
// parents, mode 0700 unless WithFileMode says otherwise) if missing. New
// refuses, with an error matching [ErrUnsafeDir], a dir that another user
// could take over: a symbolic link, a directory owned by another user than
// the process's (or root), or one its group or everyone can write to (unless
// WithFileMode shares the lease files as widely). dir must be on a local
// file system: New refuses NFS and SMB/CIFS, where neither flock nor the
// host's clock and boot id are shared the way the store needs (see the
// package documentation).
func New(dir string, opts ...Option) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("filelease: %w", lease.Invalid("directory", "empty path"))
	}
	c := config{mode: DefaultFileMode, maxWaiters: MaxWaiters}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.mode&0o600 != 0o600 {
		return nil, fmt.Errorf("filelease: %w", lease.Invalid("file mode", "%v lacks owner read and write", c.mode))
	}
	if c.maxWaiters < 1 || c.maxWaiters > MaxWaiters {
		return nil, fmt.Errorf("filelease: %w", lease.Invalid("max waiters", "%d is not between 1 and %d", c.maxWaiters, MaxWaiters))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("filelease: %w", err)
	}
	if err := prepareDir(abs, c.mode); err != nil {
		return nil, err
	}
	if err := checkLocalFS(abs); err != nil {
		return nil, fmt.Errorf("filelease: %w", err)
	}
	boot, err := readBootID()
	if err != nil {
		return nil, fmt.Errorf("filelease: %w", err)
	}
	if _, err := monotonicNow(); err != nil {
		return nil, fmt.Errorf("filelease: %w", err)
	}
	return &Store{dir: abs, mode: c.mode, boot: boot, maxWaiters: c.maxWaiters}, nil
}

// networkFS are the file systems whose type New refuses, by statfs magic.
var networkFS = map[int64]string{
	unix.NFS_SUPER_MAGIC:  "NFS",
	unix.SMB_SUPER_MAGIC:  "SMB",
	unix.SMB2_SUPER_MAGIC: "SMB2",
	unix.CIFS_SUPER_MAGIC: "CIFS",
}

func checkLocalFS(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if name, ok := networkFS[int64(st.Type)]; ok {
		return lease.Invalid("directory", "%s is on %s, a network file system; the file store is host-local", dir, name)
	}
	return nil
}

// Dir returns the absolute path of the store's directory.
func (s *Store) Dir() string { return s.dir }

// File returns the path of key's lease file (which may not exist yet). It is
// always inside Dir, whatever the key.
func (s *Store) File(key string) string { return filepath.Join(s.dir, fileName(key)) }

// Limits reports the store's limits: keys of at most MaxKeyLen bytes, TTLs of
// at least MinTTL.
func (s *Store) Limits() lease.Limits {
	return lease.Limits{MinTTL: MinTTL, MaxKeyLen: MaxKeyLen}
}

// Close marks the store closed and closes its open subscriptions. Leases stay
// in their files: a closed Store does not release them.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	var errs []error
	for sub := range subs {
		errs = append(errs, sub.Close())
	}
	return errors.Join(errs...)
}

// Acquire takes r.Key for r.Token for r.TTL if it is free or expired and no
// live waiter is queued ahead of r.Token, with the file's fence + 1;
// refreshes the TTL, keeping the fence, if r.Token already holds it; and
// otherwise returns a *lease.HeldError, queueing r.Token (or refreshing its
// entry) when r.Queue is set (see [lease.Queuer]). A new fence is on disk
// (fdatasync) before Acquire returns it.
func (s *Store) Acquire(ctx context.Context, r lease.Request) (lease.Grant, error) {
	fail := func(err error) (lease.Grant, error) {
		return lease.Grant{}, fmt.Errorf("filelease: acquire %q: %w", r.Key, err)
	}
	if err := s.check(ctx, r, true); err != nil {
		return fail(err)
	}
	if err := lease.CheckHolder(r.Holder); err != nil {
		return fail(err)
	}
	lf, err := lock(s.dir, r.Key, modeCreate, s.mode)
	if err != nil {
		return fail(err)
	}
	defer lf.close()
	now, err := monotonicNow()
	if err != nil {
		return fail(err)
	}
	expires, err := expiry(now, r.TTL)
	if err != nil {
		return fail(err)
	}
	rec := lf.rec
	q := rec.liveQueue(now, s.boot)
	dropped := len(q) != len(rec.Queue) // expired waiters to clear out
	if rec.held(now, s.boot) && rec.Token == r.Token {
		rec.Holder, rec.Expires = r.Holder, expires
		if err := lf.write(rec.withQueue(q, s.boot), false); err != nil {
			return fail(err)
		}
		return lease.Grant{Fence: rec.Fence}, nil
	}
	held := rec.held(now, s.boot)
	if n := fifo.Ahead(q, r.Token); held || n > 0 {
		refused := &lease.HeldError{Key: r.Key, Queued: n}
		if held {
			refused.Holder, refused.Fence, refused.Remaining = rec.Holder, rec.Fence, time.Duration(rec.Expires-now)
		}
		if r.Queue {
			if q, err = fifo.Enqueue(q, r.Key, r.Token, expires, s.maxWaiters); err != nil {
				return fail(err)
			}
		}
		if r.Queue || dropped {
			if err := lf.write(rec.withQueue(q, s.boot), false); err != nil {
				return fail(err)
			}
		}
		return lease.Grant{}, refused
	}
	if rec.Fence == math.MaxUint64 {
		return fail(fmt.Errorf("fence exhausted at %d", rec.Fence))
	}
	q, _ = fifo.Dequeue(q, r.Token)
	rec = record{Key: r.Key, Fence: rec.Fence + 1, Token: r.Token, Holder: r.Holder, Boot: s.boot, Expires: expires}
	if err := lf.write(rec.withQueue(q, s.boot), true); err != nil {
		return fail(err)
	}
	return lease.Grant{Fence: rec.Fence}, nil
}

// lockExisting opens r.Key's file under the write lock for an operation on a
// lease that must exist (renew, release), and reads the clock. No file means
// the token holds nothing: lease.ErrNotHeld. The caller closes lf.
func (s *Store) lockExisting(r lease.Request) (lf *leaseFile, now int64, err error) {
	lf, err = lock(s.dir, r.Key, modeWrite, s.mode)
	if err != nil {
		return nil, 0, err
	}
	if lf == nil {
		return nil, 0, lease.ErrNotHeld
	}
	if now, err = monotonicNow(); err != nil {
		lf.close()
		return nil, 0, err
	}
	return lf, now, nil
}

// Renew extends r.Key to r.TTL from now if r.Token still holds it, and
// otherwise returns an error wrapping lease.ErrNotHeld.
func (s *Store) Renew(ctx context.Context, r lease.Request) error {
	fail := func(err error) error { return fmt.Errorf("filelease: renew %q: %w", r.Key, err) }
	if err := s.check(ctx, r, true); err != nil {
		return fail(err)
	}
	lf, now, err := s.lockExisting(r)
	if err != nil {
		return fail(err)
	}
	defer lf.close()
	expires, err := expiry(now, r.TTL)
	if err != nil {
		return fail(err)
	}
	rec := lf.rec
	if !rec.held(now, s.boot) || rec.Token != r.Token {
		return fail(lease.ErrNotHeld)
	}
	rec.Expires = expires
	if err := lf.write(rec, false); err != nil {
		return fail(err)
	}
	return nil
}

// Release frees r.Key if r.Token holds it, keeping its fence in the file,
// and announces the release to subscribers; otherwise it returns an error
// wrapping lease.ErrNotHeld. Either way it takes r.Token out of the key's
// queue of waiters; if that removed an entry while the key is free, the key
// is announced as a release is, so that the next waiter looks again. The
// file is never deleted.
func (s *Store) Release(ctx context.Context, r lease.Request) error {
	fail := func(err error) error { return fmt.Errorf("filelease: release %q: %w", r.Key, err) }
	if err := s.check(ctx, r, false); err != nil {
		return fail(err)
	}
	lf, now, err := s.lockExisting(r)
	if err != nil {
		return fail(err)
	}
	defer lf.close()
	rec := lf.rec
	q := rec.liveQueue(now, s.boot)
	dropped := len(q) != len(rec.Queue)
	q, removed := fifo.Dequeue(q, r.Token)
	if !rec.held(now, s.boot) || rec.Token != r.Token {
		if removed || dropped {
			if err := lf.write(rec.withQueue(q, s.boot), false); err != nil {
				return fail(err)
			}
		}
		if removed && !rec.held(now, s.boot) {
			_ = lf.touch() // as below: the next waiter may now be first
		}
		return fail(lease.ErrNotHeld)
	}
	free := record{Key: rec.Key, Fence: rec.Fence, Boot: s.boot}
	if err := lf.write(free.withQueue(q, s.boot), false); err != nil {
		return fail(err)
	}
	// The lease is free once the record is written; a failed announcement
	// only delays waiters until they look again.
	_ = lf.touch()
	return nil
}

// Inspect reports who holds key. For a free key, Info.Fence is the last fence
// granted for it (0 if it never was).
func (s *Store) Inspect(ctx context.Context, key string) (lease.Info, error) {
	fail := func(err error) (lease.Info, error) {
		return lease.Info{}, fmt.Errorf("filelease: inspect %q: %w", key, err)
	}
	if err := s.checkCtx(ctx); err != nil {
		return fail(err)
	}
	if err := validKey(key); err != nil {
		return fail(err)
	}
	lf, err := lock(s.dir, key, modeRead, s.mode)
	if err != nil {
		return fail(err)
	}
	if lf == nil {
		return lease.Info{Key: key}, nil
	}
	defer lf.close()
	now, err := monotonicNow()
	if err != nil {
		return fail(err)
	}
	rec := lf.rec
	if !rec.held(now, s.boot) {
		return lease.Info{Key: key, Fence: rec.Fence}, nil
	}
	return lease.Info{Key: key, Held: true, Holder: rec.Holder, Fence: rec.Fence, Remaining: time.Duration(rec.Expires - now)}, nil
}

// expiry returns now + ttl, rejecting a TTL that overflows the clock.
func expiry(now int64, ttl time.Duration) (int64, error) {
	if int64(ttl) > math.MaxInt64-now {
		return 0, lease.Invalid("ttl", "%v is too long", ttl)
	}
	return now + int64(ttl), nil
}

func (s *Store) checkCtx(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

func (s *Store) check(ctx context.Context, r lease.Request, needTTL bool) error {
	if err := s.checkCtx(ctx); err != nil {
		return err
	}
	if err := validKey(r.Key); err != nil {
		return err
	}
	if r.Token == "" {
		return lease.Invalid("token", "empty")
	}
	if len(r.Token) > maxTokenLen {
		return lease.Invalid("token", "%d bytes, longer than %d", len(r.Token), maxTokenLen)
	}
	if needTTL && r.TTL < MinTTL {
		return lease.Invalid("ttl", "%v is shorter than %v", r.TTL, MinTTL)
	}
	return nil
}

func validKey(key string) error {
	switch {
	case key == "":
		return lease.Invalid("key", "empty")
	case len(key) > MaxKeyLen:
		return lease.Invalid("key", "%d bytes, longer than %d", len(key), MaxKeyLen)
	}
	return nil
}
