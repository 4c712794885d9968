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
