// lease list: the keys of a store, as a table or JSON lines; shared with
// lease break and lease watch.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/termtext"
)

func newListCmd(stdout, stderr io.Writer) *cobra.Command {
	var c common
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "list [flags] [PREFIX]",
		Short: "List the held keys, their holders and waiters",
		Long: `List every key starting with PREFIX that is held, has waiters or was just
broken: one line per holder with its kind (exclusive, shared, semaphore),
holder, ID (a digest of its token), fence and remaining TTL, and the number of
waiters. The table is sorted by key; --json prints one JSON object per key, in
the store's order, as the store pages them.`,
		Example: `  lease list
  lease list job:
  lease list --json -s postgres://lease@db/app | jq 'select(.waiters|length > 0)'`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completePrefix(&c),
		RunE: func(_ *cobra.Command, args []string) error {
			ctx, cancel := timeoutCtx(context.Background(), timeout)
			defer cancel()
			return exit(list(ctx, &c, first(args), asJSON, stdout, stderr))
		},
	}
	fs := cmd.Flags()
	c.flags(fs)
	fs.BoolVar(&asJSON, "json", false, "print one JSON object per key")
	fs.DurationVar(&timeout, "timeout", time.Minute, "give up on the store after this long (0: no limit)")
	withEnv(fs)
	return cmd
}

// first returns args[0], or "".
func first(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

func list(ctx context.Context, c *common, prefix string, asJSON bool, stdout, stderr io.Writer) int {
	client, safeURL, done, code := c.openClient(ctx, "list", stderr)
	if code != exitOK {
		return code
	}
	defer done()
	seen := make(map[string]lease.KeyInfo) // a backend's scan may repeat a key
	for k, err := range client.List(ctx, prefix) {
		if err != nil {
			return storeFailed(stderr, "list", safeURL, err)
		}
		if _, dup := seen[k.Key]; dup {
			continue
		}
		if asJSON {
			seen[k.Key] = lease.KeyInfo{} // the name only: the listing streams
			if err := writeJSON(stdout, keyJSONOf(k)); err != nil {
				return fail(stderr, "list", exitSoftware, "%v", err)
			}
			continue
		}
		seen[k.Key] = k
	}
	if asJSON {
		return exitOK
	}
	keys := slices.Sorted(maps.Keys(seen))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKIND\tHOLDER\tID\tFENCE\tREMAINING\tWAITERS")
	for _, key := range keys {
		writeRows(tw, seen[key])
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, "list", exitSoftware, "%v", err)
	}
	return exitOK
}

// writeRows writes k's rows of the table: one per holder, or one without.
func writeRows(w io.Writer, k lease.KeyInfo) {
	waiters := strconv.Itoa(len(k.Waiters))
	kind := string(k.Kind)
	if k.Kind == lease.KindSemaphore {
		kind = fmt.Sprintf("semaphore %d/%d", k.Slot, k.N)
	}
	key := termtext.Escape(k.Key)
	if len(k.Holders) == 0 {
		fmt.Fprintf(w, "%s\t%s\t-\t-\t-\t-\t%s\n", key, kind, waiters)
		return
	}
	for _, h := range k.Holders {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", key, kind, tabless(h.Holder), h.ID, h.Fence, remaining(h.Remaining), waiters)
	}
}

// tabless escapes s for a table cell: no control characters, no tabs.
func tabless(s string) string {
	return strings.ReplaceAll(termtext.Escape(s), "\t", `\t`)
}

// remaining prints a remaining TTL; 0 means the store cannot tell (etcd).
func remaining(d time.Duration) string {
	if d <= 0 {
		return "?"
	}
	return d.Round(time.Millisecond).String()
}

// keyJSON is one key of lease list --json, and what lease break --json
// broke.
type keyJSON struct {
	Key       string       `json:"key"`
	Kind      lease.Kind   `json:"kind"`
	Semaphore string       `json:"semaphore,omitempty"`
	Slot      int          `json:"slot,omitempty"`
	N         int          `json:"n,omitempty"`
	Holders   []holderJSON `json:"holders"`
	Waiters   []waiterJSON `json:"waiters"`
	Broken    []string     `json:"broken,omitempty"`
}

type holderJSON struct {
	ID          string `json:"id"`
	Holder      string `json:"holder"`
	Fence       uint64 `json:"fence"`
	RemainingMS int64  `json:"remaining_ms"`
	Shared      bool   `json:"shared,omitempty"`
}

type waiterJSON struct {
	ID          string `json:"id"`
	Shared      bool   `json:"shared,omitempty"`
	RemainingMS int64  `json:"remaining_ms"`
}

func keyJSONOf(k lease.KeyInfo) keyJSON {
	out := keyJSON{Key: k.Key, Kind: k.Kind, Semaphore: k.Semaphore, Slot: k.Slot, N: k.N,
		Holders: []holderJSON{}, Waiters: []waiterJSON{}, Broken: k.Broken}
	for _, h := range k.Holders {
		out.Holders = append(out.Holders, holderJSONOf(h))
	}
	for _, w := range k.Waiters {
		out.Waiters = append(out.Waiters, waiterJSON{ID: w.ID, Shared: w.Shared, RemainingMS: w.Remaining.Milliseconds()})
	}
	return out
}

func holderJSONOf(h lease.HolderInfo) holderJSON {
	return holderJSON{ID: h.ID, Holder: h.Holder, Fence: h.Fence, RemainingMS: h.Remaining.Milliseconds(), Shared: h.Shared}
}

// writeJSON writes v as one line, its control characters escaped.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(termtext.JSON(b), '\n'))
	return err
}
