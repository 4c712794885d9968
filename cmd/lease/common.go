// Shared by the subcommands: exit codes, common flags, logging, opening the
// store.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/oneline"
	"github.com/leasekit/lease/internal/termtext"
	"github.com/leasekit/lease/leaseurl"
)

// Exit codes; doc.go documents them.
const (
	exitOK          = 0
	exitFailed      = 1  // lease demo: an expectation failed
	exitUsage       = 64 // bad flags, bad store URL (sysexits EX_USAGE)
	exitUnavailable = 69 // the store could not be opened or reached (EX_UNAVAILABLE)
	exitSoftware    = 70 // internal error, e.g. the metrics listener (EX_SOFTWARE)
	exitNotAcquired = 75 // lease run: the lease could not be acquired, or its queue is full (EX_TEMPFAIL)
	exitLost        = 76 // lease run: the lease was lost while the command ran
	exitCannotExec  = 126
	exitNotFound    = 127
)

// storeEnv names the environment variable with the default store URL.
const storeEnv = "LEASE_STORE"

// common are the flags every subcommand has.
type common struct {
	store     string
	logLevel  string
	logFormat string
}

// flags adds the common flags to a subcommand's flag set.
func (c *common) flags(fs *pflag.FlagSet) {
	fs.StringVarP(&c.store, "store", "s", "", "store URL (default the per-user file store "+leaseurl.DefaultURL()+")")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
}

// register adds the common flags to a hidden command's flag set.
func (c *common) register(fs *flagSet) {
	fs.StringVar(&c.store, "store", "", "store URL (default $"+storeEnv+", else the per-user file store "+leaseurl.DefaultURL()+")")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
}

// storeURL returns the store URL to use: --store, $LEASE_STORE, the default.
func (c *common) storeURL() string {
	if c.store != "" {
		return c.store
	}
	if s := os.Getenv(storeEnv); s != "" {
		return s
	}
	return leaseurl.DefaultURL()
}

// logger returns the slog logger the flags ask for, writing to w.
func (c *common) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var log *slog.Logger
	switch strings.ToLower(c.logFormat) {
	case "text":
		log = slog.New(slog.NewTextHandler(w, opts))
	case "json":
		log = slog.New(slog.NewJSONHandler(w, opts))
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", c.logFormat)
	}
	raw := c.storeURL()
	routeRedisLog(log, func(s string) string { return leaseurl.RedactText(s, raw) })
	return log, nil
}

// openStore opens the store named by the flags; the returned exit code says
// what kind of failure it was. Errors never contain the password.
func (c *common) openStore(ctx context.Context, log *slog.Logger) (driver.Store, string, int, error) {
	raw := c.storeURL()
	safe := leaseurl.Redact(raw)
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := leaseurl.Open(octx, raw)
	if err != nil {
		code := exitUnavailable
		if errors.Is(err, lease.ErrInvalid) || errors.Is(err, leaseurl.ErrUnsupported) {
			code = exitUsage
		}
		return nil, safe, code, err
	}
	log.Debug("store opened", "store", safe)
	return s, safe, exitOK, nil
}

// fail prints "lease CMD: msg" to stderr, on one line, and returns code.
// Control characters left in msg (from a key, holder or store error) are
// escaped: they must not drive the terminal.
func fail(stderr io.Writer, cmd string, code int, format string, args ...any) int {
	fmt.Fprintf(stderr, "lease %s: %s\n", cmd, termtext.Escape(oneline.Join(fmt.Sprintf(format, args...))))
	return code
}

// openClient opens the store and a Client on it for the operator's
// commands (list, break, watch); on failure it has printed the error and
// returns the exit code, else close and exitOK.
func (c *common) openClient(ctx context.Context, cmd string, stderr io.Writer) (*lease.Client, string, func(), int) {
	log, err := c.logger(stderr)
	if err != nil {
		return nil, "", nil, fail(stderr, cmd, exitUsage, "%v", err)
	}
	store, safeURL, code, err := c.openStore(ctx, log)
	if err != nil {
		return nil, "", nil, fail(stderr, cmd, code, "%v", err)
	}
	client, err := lease.New(store, lease.WithLogger(log))
	if err != nil {
		store.Close()
		return nil, "", nil, fail(stderr, cmd, exitSoftware, "%v", err)
	}
	return client, safeURL, func() { client.Close(); store.Close() }, exitOK
}

// storeFailed prints the failure of an operation on the store and returns
// its exit code: 64 for an invalid key or prefix, else 69 (the store is
// unreachable, or cannot do it).
func storeFailed(stderr io.Writer, cmd, safeURL string, err error) int {
	code := exitUnavailable
	if errors.Is(err, lease.ErrInvalid) {
		code = exitUsage
	}
	return fail(stderr, cmd, code, "store %s: %v", safeURL, err)
}

// timeoutCtx is ctx bounded by d (0: no limit).
func timeoutCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}
