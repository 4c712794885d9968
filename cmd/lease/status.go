// lease status: who holds a key.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/termtext"
)

// statusJSON is the object lease status --json prints.
type statusJSON struct {
	Key         string `json:"key"`
	Held        bool   `json:"held"`
	Holder      string `json:"holder"`
	Fence       uint64 `json:"fence"`
	RemainingMS int64  `json:"remaining_ms"`
	Store       string `json:"store"`
	Shared      bool   `json:"shared"`
	Readers     int    `json:"readers"`
}

func newStatusCmd(stdout, stderr io.Writer) *cobra.Command {
	var c common
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status [flags] KEY",
		Short: "Show who holds KEY",
		Long: `Show the holder, fence and remaining TTL of KEY, or "free". --json prints one
object: {"key", "held", "holder", "fence", "remaining_ms", "store", "shared",
"readers"}; remaining_ms is 0 when the store cannot tell (etcd).`,
		Example: `  lease status job:invoice
  lease status --json -s redis://localhost:6379 job:invoice`,
		Args: oneArg("KEY"),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeKeys(cmd, &c, toComplete)
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return exit(status(&c, args[0], asJSON, timeout, stdout, stderr))
		},
	}
	fs := cmd.Flags()
	c.flags(fs)
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	fs.DurationVar(&timeout, "timeout", 15*time.Second, "give up on the store after this long (0: no limit)")
	withEnv(fs)
	return cmd
}

// status prints what the store says of key.
func status(c *common, key string, asJSON bool, timeout time.Duration, stdout, stderr io.Writer) int {
	if err := checkDuration("timeout", timeout, 0, 0); err != nil {
		return fail(stderr, "status", exitUsage, "%v", err)
	}
	log, err := c.logger(stderr)
	if err != nil {
		return fail(stderr, "status", exitUsage, "%v", err)
	}
	// 0 means no limit, as for lease run --timeout.
	ctx, cancel := context.WithCancel(context.Background())
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	store, safeURL, code, err := c.openStore(ctx, log)
	if err != nil {
		return fail(stderr, "status", code, "%v", err)
	}
	defer store.Close()
	client, err := lease.New(store, lease.WithLogger(log))
	if err != nil {
		return fail(stderr, "status", exitSoftware, "%v", err)
	}
	defer client.Close()
	info, err := client.Inspect(ctx, key)
	if err != nil {
		code := exitUnavailable
		if errors.Is(err, lease.ErrInvalid) {
			code = exitUsage
		}
		return fail(stderr, "status", code, "inspect %q: store %s: %v", key, safeURL, stripOp(err, "inspect", key))
	}
	if asJSON {
		out := statusJSON{Key: key, Held: info.Held, Holder: info.Holder, Fence: info.Fence,
			RemainingMS: info.Remaining.Milliseconds(), Store: safeURL, Shared: info.Shared, Readers: info.Readers}
		b, err := json.Marshal(out)
		if err != nil {
			return fail(stderr, "status", exitSoftware, "%v", err)
		}
		if _, err := stdout.Write(append(termtext.JSON(b), '\n')); err != nil {
			return fail(stderr, "status", exitSoftware, "%v", err)
		}
		return exitOK
	}
	printStatus(stdout, key, safeURL, info)
	return exitOK
}

// printStatus prints info; key and holder come from whoever wrote to the
// store, so they are escaped (and the store URL with them).
func printStatus(w io.Writer, key, store string, info lease.Info) {
	fmt.Fprintf(w, "key:       %s\n", termtext.Escape(key))
	fmt.Fprintf(w, "store:     %s\n", termtext.Escape(store))
	if !info.Held {
		fmt.Fprintf(w, "status:    free\n")
		if info.Fence > 0 {
			fmt.Fprintf(w, "fence:     %d (the last one granted)\n", info.Fence)
		}
		return
	}
	if info.Shared {
		fmt.Fprintf(w, "status:    held shared by %d reader(s)\n", info.Readers)
		fmt.Fprintf(w, "holder:    %s (one of them)\n", termtext.Escape(info.Holder))
	} else {
		fmt.Fprintf(w, "status:    held\n")
		fmt.Fprintf(w, "holder:    %s\n", termtext.Escape(info.Holder))
	}
	fmt.Fprintf(w, "fence:     %d\n", info.Fence)
	if info.Remaining > 0 {
		fmt.Fprintf(w, "remaining: %v\n", info.Remaining.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "remaining: unknown\n")
	}
}
