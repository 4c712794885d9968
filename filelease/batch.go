// Batched renewal (lease.BatchRenewer).

package filelease

import (
	"context"
	"fmt"

	"github.com/leasekit/lease"
)

var _ lease.BatchRenewer = (*Store)(nil)

// RenewMany implements lease.BatchRenewer: it renews every request in one
// call, each as Renew does (its file locked, checked and rewritten). The
// store has no network round trips to save; one call per heartbeat round
// instead of one per lease saves the Client's per-lease calls. A request
// not reached before ctx ends gets ctx's error.
func (s *Store) RenewMany(ctx context.Context, rs []lease.Request) []error {
	errs := make([]error, len(rs))
	for i, r := range rs {
		if err := ctx.Err(); err != nil {
			errs[i] = fmt.Errorf("filelease: renew %q: %w", r.Key, err)
			continue
		}
		errs[i] = s.Renew(ctx, r)
	}
	return errs
}
