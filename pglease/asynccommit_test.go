// Releases commit asynchronously, for their own transaction only.

package pglease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestReleaseAsyncCommitIsLocal: a release's synchronous_commit=off (see
// asyncCommit) ends with its transaction: the pool's connection, reused at
// once, is back to synchronous commits, in both modes and for a foreign
// release (a waiter leaving the queue).
func TestReleaseAsyncCommitIsLocal(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			pool := newPool(t, sharedDSN(t), 1)
			migrate(t, pool)
			s := newStore(t, pool, mode)
			var before string
			if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&before); err != nil {
				t.Fatal(err)
			}
			r := req("k", "A", 5*time.Second)
			if _, err := s.Acquire(ctx, r); err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if err := s.Release(ctx, r); err != nil {
				t.Fatalf("Release: %v", err)
			}
			w := req("k", "W", 5*time.Second)
			if err := s.Release(ctx, w); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("Release of a token that holds nothing: %v, want ErrNotHeld", err)
			}
			var after string
			if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&after); err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Errorf("synchronous_commit = %q after releases on the pool's only connection, want %q (the release's setting leaked)", after, before)
			}
		})
	}
}
