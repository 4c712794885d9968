// lease status: who holds a key.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

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

func statusCommand(args []string, stdout, stderr io.Writer) int {
	var c common
	var asJSON bool
	var timeout time.Duration
	fs := newFlagSet("status", "[flags] KEY", stderr)
	c.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	fs.DurationVar(&timeout, "timeout", 15*time.Second, "give up on the store after this long (0: no limit)")
	// Flags may come before or after KEY.
	var keys []string
	for {
		if code := fs.parse(args); code >= 0 {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		keys = append(keys, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(keys) != 1 {
		return fail(stderr, "status", exitUsage, "want exactly one KEY (lease status [flags] KEY)")
	}
	key := keys[0]
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
