// RenewMany: many renewals in one pipeline (lease.BatchRenewer).

package redislease

import (
	"context"
	"fmt"

	"github.com/leasekit/lease"
	"github.com/redis/go-redis/v9"
)

// RenewMany renews every request in one pipeline of EVALSHA calls: one round
// trip on a single Redis node, one per node (in parallel) on a Cluster. It
// returns one error per request, in order, meaning what [Store.Renew]'s
// would. If the server lacks the cached script, the script is loaded and the
// affected renewals are sent once more.
func (s *Store) RenewMany(ctx context.Context, rs []lease.Request) []error {
	if s.ack.n > 0 {
		return s.renewManyAcked(ctx, rs) // replicaack.go
	}
	errs := make([]error, len(rs))
	idx := make([]int, 0, len(rs)) // requests to send
	for i, r := range rs {
		if err := validate(r, true); err != nil {
			errs[i] = fmt.Errorf("redislease: renew %q: %w", r.Key, err)
			continue
		}
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return errs
	}
	cmds := s.renewPipeline(ctx, rs, idx)

	var retry []int
	for j, i := range idx {
		if isNoScript(cmds[j].Err()) {
			retry = append(retry, i)
			continue
		}
		n, err := cmds[j].Int64()
		errs[i] = renewResult(rs[i].Key, n, err)
	}
	if len(retry) == 0 {
		return errs
	}
	// The script cache was empty (first use, a restart, SCRIPT FLUSH):
	// load it (on every node of a Cluster) and send those renewals again.
	if err := renewScript.Load(ctx, s.client).Err(); err != nil {
		for _, i := range retry {
			errs[i] = fmt.Errorf("redislease: renew %q: load script: %w", rs[i].Key, err)
		}
		return errs
	}
	cmds = s.renewPipeline(ctx, rs, retry)
	for j, i := range retry {
		n, err := cmds[j].Int64()
		errs[i] = renewResult(rs[i].Key, n, err)
	}
	return errs
}

// renewPipeline sends EVALSHA renew for rs[i], i in idx, in one pipeline.
// Errors are read from each command (Exec's own error is the first of them).
func (s *Store) renewPipeline(ctx context.Context, rs []lease.Request, idx []int) []*redis.Cmd {
	pipe := s.client.Pipeline()
	cmds := make([]*redis.Cmd, len(idx))
	for j, i := range idx {
		r := rs[i]
		cmds[j] = renewScript.EvalSha(ctx, pipe, []string{s.leaseKey(r.Key)}, leaseToken(r.Token), ttlMillis(r.TTL))
	}
	_, _ = pipe.Exec(ctx)
	return cmds
}
