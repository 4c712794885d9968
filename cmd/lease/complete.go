// Shell completion of keys and prefixes, from the store's listing.

package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasekit/lease/internal/termtext"
)

// Completion must not make the shell wait: it looks at the store briefly,
// and offers at most maxCompletions keys.
const (
	completionTimeout = 2 * time.Second
	maxCompletions    = 200
)

// completeKeys offers the listed keys starting with toComplete; nothing
// when the store cannot list or does not answer in time.
func completeKeys(cmd *cobra.Command, c *common, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if flagsFromEnv(cmd.Flags()) != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	client, _, done, code := c.openClient(ctx, cmd.Name(), io.Discard)
	if code != exitOK {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer done()
	var keys []cobra.Completion
	seen := map[string]bool{}
	for k, err := range client.List(ctx, toComplete) {
		if err != nil || len(keys) == maxCompletions {
			break
		}
		if !seen[k.Key] && termtext.Escape(k.Key) == k.Key { // a control character would break the shell's list
			seen[k.Key] = true
			keys = append(keys, cobra.CompletionWithDesc(k.Key, string(k.Kind)))
		}
	}
	return keys, cobra.ShellCompDirectiveNoFileComp
}

// completePrefix completes the one PREFIX argument of list and watch.
func completePrefix(c *common) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeKeys(cmd, c, toComplete)
	}
}
