//go:build linux

// Options of the file store.

package filelease

import "os"

// DefaultFileMode is the permission of new lease files when WithFileMode is
// not given: only the owner can take leases. The directory, when New creates
// it, gets the same bits plus search (x) wherever read is set (0700).
const DefaultFileMode os.FileMode = 0o600

type config struct {
	mode       os.FileMode
	maxWaiters int
}

// Option configures a Store made by [New].
type Option func(*config)

// WithFileMode sets the permission bits of new lease files (default
// [DefaultFileMode]), and of the directory if New creates it (plus x where r
// is set); the process umask still applies. Use 0o660 with a shared group so
// that processes of several users of the group exclude each other. Only the
// permission bits of mode are used.
func WithFileMode(mode os.FileMode) Option {
	return func(c *config) { c.mode = mode.Perm() }
}

// dirMode adds search permission wherever read permission is set.
func dirMode(m os.FileMode) os.FileMode {
	return m | (m&0o444)>>2
}

// WithMaxWaiters caps each key's queue at n live waiters (default and most:
// [MaxWaiters]); a queued Acquire of a new token beyond it fails with a
// *[lease.QueueFullError]. The cap is exact: the queue is changed under the
// file's lock. New refuses n outside 1..MaxWaiters with an error matching
// [lease.ErrInvalid].
func WithMaxWaiters(n int) Option {
	return func(c *config) { c.maxWaiters = n }
}
