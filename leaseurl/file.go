// The file:// scheme: filelease in a host-local directory.

package leaseurl

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/filelease"
)

func init() { Register("file", openFile) }

// openFile opens file:///abs/dir (or file:relative/dir); an empty path means
// DefaultFileDir. filelease creates the directory if it is missing.
func openFile(_ context.Context, u *url.URL, o *Options) (driver.Store, func() error, error) {
	if u.Host != "" && u.Host != "localhost" {
		return nil, nil, lease.Invalid("store", "file URL with host %q: write file:///absolute/dir or file:relative/dir", u.Host)
	}
	if u.RawQuery != "" {
		return nil, nil, lease.Invalid("store", "file URLs take no options besides max_waiters")
	}
	dir := u.Path
	if u.Opaque != "" {
		dir = u.Opaque
	}
	if dir == "" {
		dir = DefaultFileDir()
	}
	var opts []filelease.Option
	if n, ok, err := o.maxWaiters(); err != nil {
		return nil, nil, err
	} else if ok {
		opts = append(opts, filelease.WithMaxWaiters(n))
	}
	s, err := filelease.New(filepath.FromSlash(dir), opts...)
	if err != nil {
		return nil, nil, err
	}
	return s, nil, nil
}

// DefaultFileDir returns the per-user directory of the default file store,
// the first of:
//
//   - $XDG_STATE_HOME/leasekit, else ~/.local/state/leasekit, else
//     $XDG_CACHE_HOME/leasekit (os.UserCacheDir): the user's own, and kept
//     across reboots, so fences keep increasing;
//   - $XDG_RUNTIME_DIR/leasekit, when there is no home directory: the
//     user's own (the session manager makes it 0700), emptied at logout and
//     reboot, which restarts fences;
//   - os.TempDir()/leasekit-<uid>, the last resort: another user could
//     create that name first, which filelease.New refuses
//     ([filelease.ErrUnsafeDir]) rather than use.
//
// Relative XDG variables are ignored, as the XDG base directory
// specification says. filelease.New creates the directory 0700.
func DefaultFileDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "leasekit")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".local", "state", "leasekit")
	}
	if c, err := os.UserCacheDir(); err == nil && filepath.IsAbs(c) {
		return filepath.Join(c, "leasekit")
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "leasekit")
	}
	return filepath.Join(os.TempDir(), "leasekit-"+strconv.Itoa(os.Getuid()))
}

// DefaultURL returns the store URL used when none is configured: the file
// store in DefaultFileDir.
func DefaultURL() string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(DefaultFileDir())}).String()
}
