// lease break: free a key whatever holds it (Client.ForceRelease), after
// asking on a terminal.

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/termtext"
)

func newBreakCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var c common
	var yes, asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "break [flags] KEY",
		Short: "Free KEY whatever holds it; the evicted holder's fence is refused",
		Long: `Break the lease KEY: free it whatever token holds it (its writer, or every
reader), keeping its waiters. The next holder gets a larger fence, so a data
layer that checks fences refuses the evicted holder's writes; the evicted
holder learns of it at its next renewal (lease run then exits 76).

On a terminal, break shows the holder and asks first; --yes skips the
question, and without a terminal --yes is required. It prints what it broke.`,
		Example: `  lease break job:invoice
  lease break --yes -s redis://localhost:6379 job:invoice
  lease break -y --json job:invoice`,
		Args: oneArg("KEY"),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeKeys(cmd, &c, toComplete)
		},
		RunE: func(_ *cobra.Command, args []string) error {
			b := breaker{c: &c, key: args[0], yes: yes, asJSON: asJSON, timeout: timeout, stdin: stdin, stdout: stdout, stderr: stderr}
			return exit(b.run())
		},
	}
	fs := cmd.Flags()
	c.flags(fs)
	fs.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (required without a terminal)")
	fs.BoolVar(&asJSON, "json", false, "print what was broken as one JSON object")
	fs.DurationVar(&timeout, "timeout", 15*time.Second, "give up on each call to the store after this long (0: no limit)")
	withEnv(fs)
	return cmd
}

// breaker is one lease break.
type breaker struct {
	c              *common
	key            string
	yes, asJSON    bool
	timeout        time.Duration // of each call to the store; the question waits
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (b *breaker) run() int {
	if !b.yes && !isTerminal(b.stdin) {
		return fail(b.stderr, "break", exitUsage, "refusing to break %q without confirmation: stdin is not a terminal; add --yes", b.key)
	}
	ctx, cancel := timeoutCtx(context.Background(), b.timeout)
	defer cancel()
	client, safeURL, done, code := b.c.openClient(ctx, "break", b.stderr)
	if code != exitOK {
		return code
	}
	defer done()
	if !b.yes {
		if code := b.confirm(ctx, client, safeURL); code != exitOK {
			return code
		}
		ctx, cancel = timeoutCtx(context.Background(), b.timeout) // the answer took its time
		defer cancel()
	}
	k, err := client.ForceRelease(ctx, b.key)
	if err != nil {
		return storeFailed(b.stderr, "break", safeURL, err)
	}
	if b.asJSON {
		if err := writeJSON(b.stdout, keyJSONOf(k)); err != nil {
			return fail(b.stderr, "break", exitSoftware, "%v", err)
		}
		return exitOK
	}
	key := termtext.Escape(b.key)
	if len(k.Holders) == 0 {
		fmt.Fprintf(b.stdout, "%s was not held: nothing broken\n", key)
		return exitOK
	}
	for _, h := range k.Holders {
		fmt.Fprintf(b.stdout, "broke %s: holder %s, id %s, fence %d (%s remained)\n",
			key, termtext.Escape(h.Holder), h.ID, h.Fence, remaining(h.Remaining))
	}
	return exitOK
}

// confirm shows who holds the key and asks on stderr; exitOK means yes.
func (b *breaker) confirm(ctx context.Context, client *lease.Client, safeURL string) int {
	info, err := client.Inspect(ctx, b.key)
	if err != nil {
		return storeFailed(b.stderr, "break", safeURL, err)
	}
	key := termtext.Escape(b.key)
	if !info.Held {
		fmt.Fprintf(b.stderr, "%s is not held on %s. Break it anyway (its waiters stay)? [y/N] ", key, termtext.Escape(safeURL))
	} else {
		fmt.Fprintf(b.stderr, "%s is held by %s (fence %d, %s remaining) on %s.\nBreak it? Its holder's writes will be refused. [y/N] ",
			key, termtext.Escape(info.Holder), info.Fence, remaining(info.Remaining), termtext.Escape(safeURL))
	}
	answer, _ := bufio.NewReader(b.stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return fail(b.stderr, "break", exitFailed, "not broken")
	}
	return exitOK
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
