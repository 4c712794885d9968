// lease watch: a live stream of the changes of a store's keys
// (Client.Watch).

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/termtext"
)

func newWatchCmd(stdout, stderr io.Writer) *cobra.Command {
	var c common
	var asJSON bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "watch [flags] [PREFIX]",
		Short: "Stream acquisitions, releases, expiries, breaks and queue changes",
		Long: `Print the changes of the keys starting with PREFIX as they happen, one line
each, until interrupted: acquired, released, expired, broken (holds), queued
and left (waiters). The keys are listed every --interval, and at once when the
store announces a release; a hold that comes and goes between two listings is
not seen. --json prints one JSON object per change.`,
		Example: `  lease watch
  lease watch -i 200ms job:
  lease watch --json -s redis://localhost:6379 | jq .`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completePrefix(&c),
		RunE: func(_ *cobra.Command, args []string) error {
			return exit(watch(&c, first(args), interval, asJSON, stdout, stderr))
		},
	}
	fs := cmd.Flags()
	c.flags(fs)
	fs.BoolVar(&asJSON, "json", false, "print one JSON object per change")
	fs.DurationVarP(&interval, "interval", "i", lease.DefaultWatchInterval, "list the keys this often (10ms to 1h)")
	withEnv(fs)
	return cmd
}

// changeJSON is one line of lease watch --json.
type changeJSON struct {
	Time   time.Time        `json:"time"`
	Kind   lease.ChangeKind `json:"kind"`
	Key    string           `json:"key"`
	Holder *holderJSON      `json:"holder,omitempty"`
	Waiter *waiterJSON      `json:"waiter,omitempty"`
}

func watch(c *common, prefix string, interval time.Duration, asJSON bool, stdout, stderr io.Writer) int {
	if err := checkDuration("interval", interval, 10*time.Millisecond, time.Hour); err != nil {
		return fail(stderr, "watch", exitUsage, "%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	client, safeURL, done, code := c.openClient(ctx, "watch", stderr)
	if code != exitOK {
		return code
	}
	defer done()
	fmt.Fprintf(stderr, "lease watch: watching %q on %s\n", prefix, termtext.Escape(safeURL))
	for ch, err := range client.Watch(ctx, prefix, interval) {
		switch {
		case errors.Is(err, errors.ErrUnsupported), errors.Is(err, lease.ErrInvalid):
			return storeFailed(stderr, "watch", safeURL, err)
		case err != nil: // the next listing may work: go on
			fmt.Fprintf(stderr, "lease watch: store %s: %s\n", termtext.Escape(safeURL), termtext.Escape(err.Error()))
			continue
		}
		if err := printChange(stdout, ch, asJSON); err != nil {
			return fail(stderr, "watch", exitSoftware, "%v", err)
		}
	}
	return exitOK
}

func printChange(w io.Writer, ch lease.Change, asJSON bool) error {
	waiter := ch.Kind == lease.ChangeQueued || ch.Kind == lease.ChangeLeft
	if asJSON {
		out := changeJSON{Time: ch.Time, Kind: ch.Kind, Key: ch.Key}
		if waiter {
			out.Waiter = &waiterJSON{ID: ch.Waiter.ID, Shared: ch.Waiter.Shared, RemainingMS: ch.Waiter.Remaining.Milliseconds()}
		} else {
			h := holderJSONOf(ch.Holder)
			out.Holder = &h
		}
		return writeJSON(w, out)
	}
	at := ch.Time.Format("15:04:05.000")
	var err error
	if waiter {
		_, err = fmt.Fprintf(w, "%s %-8s %s waiter=%s shared=%t\n", at, ch.Kind, termtext.Escape(ch.Key), ch.Waiter.ID, ch.Waiter.Shared)
	} else {
		_, err = fmt.Fprintf(w, "%s %-8s %s holder=%q id=%s fence=%d\n", at, ch.Kind, termtext.Escape(ch.Key), ch.Holder.Holder, ch.Holder.ID, ch.Holder.Fence)
	}
	return err
}
