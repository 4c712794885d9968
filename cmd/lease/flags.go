// The flag sets of the subcommands: one-line usage errors, and the ranges
// every duration and count flag is checked against before anything starts.

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// maxLeaseTTL bounds --ttl and --grace of lease run: a longer TTL would keep
// the key for more than a day after a crash, and a longer grace would let the
// command work unleased that long after a loss. It also keeps every deadline
// derived from them far from overflowing.
const maxLeaseTTL = 24 * time.Hour

// flagSet is a subcommand's flag set. Its errors are one line on stderr
// ("lease run: invalid value ..."); the flag list is printed only for -h.
type flagSet struct {
	*flag.FlagSet
	name, synopsis string
	stderr         io.Writer
}

// newFlagSet returns the flag set of subcommand name.
func newFlagSet(name, synopsis string, stderr io.Writer) *flagSet {
	fs := flag.NewFlagSet("lease "+name, flag.ContinueOnError)
	// The flag package prints its error and the whole flag list on a bad
	// flag; parse prints one line instead.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, name: name, synopsis: synopsis, stderr: stderr}
}

// parse parses args, returning a non-negative exit code when the command
// should stop: exitOK after -h (the flag list printed), exitUsage after a
// one-line error.
func (fs *flagSet) parse(args []string) int {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return -1
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(fs.stderr, "Usage: lease %s %s\n\nFlags:\n", fs.name, fs.synopsis)
		fs.SetOutput(fs.stderr)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		return exitOK
	}
	return fail(fs.stderr, fs.name, exitUsage, "%v (lease help %s lists the flags)", err, fs.name)
}

// checkDuration returns a usage error unless lo ≤ d ≤ hi (hi 0: no upper
// bound). Flags whose 0 has a meaning of its own pass lo = 0.
func checkDuration(name string, d, lo, hi time.Duration) error {
	switch {
	case d >= lo && (hi == 0 || d <= hi):
		return nil
	case hi > 0:
		return fmt.Errorf("--%s %v: want between %v and %v", name, shortDur(d), shortDur(lo), shortDur(hi))
	case lo == 0:
		return fmt.Errorf("--%s %v: must not be negative", name, shortDur(d))
	}
	return fmt.Errorf("--%s %v: want at least %v", name, shortDur(d), shortDur(lo))
}

// checkCount returns a usage error unless lo ≤ n ≤ hi.
func checkCount(name string, n, lo, hi int) error {
	if n < lo || n > hi {
		return fmt.Errorf("--%s %d: want between %d and %d", name, n, lo, hi)
	}
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// shortDur prints d without trailing zero units: 24h, 1m, 10ms.
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
