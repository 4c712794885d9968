// WithReplicaAck: each write script followed by WAIT in the same round trip,
// on the node that holds the key.

package redislease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
	"github.com/redis/go-redis/v9"
)

// ErrReplicaAck matches the error of a write (acquire, renew, release) that
// the primary applied but fewer replicas than WithReplicaAck asks for
// acknowledged within its timeout. It is a transient error: the lease
// Client retries, and an acquisition that returned it is released again
// (the Client treats its outcome as unknown).
var ErrReplicaAck = errors.New("redislease: too few replicas acknowledged the write")

// replicaAck is the WithReplicaAck setting: n = 0 means no WAIT.
type replicaAck struct {
	n       int
	timeout time.Duration
	err     error // invalid arguments, reported by New
}

// WithReplicaAck makes every write (acquire, renew, release and each batch of
// RenewMany) wait until at least n replicas of the key's primary have
// acknowledged it, for at most timeout: the store pipelines WAIT n timeout
// after the script, in the same round trip and on the same connection. A
// write acknowledged by fewer replicas returns an error wrapping
// [ErrReplicaAck]. n = 0 (the default) sends no WAIT.
//
// WAIT narrows, but does not close, the window in which a failover loses a
// lease: Redis stays asynchronous, and a failover may still promote a replica
// that missed the write (see docs/SECURITY.md). Fencing, checked by the
// protected resource, is what keeps two holders from both writing. The price
// is one replica round trip per write, and no write at all while fewer than
// n replicas are connected.
//
// New returns an error matching lease.ErrInvalid if n or timeout is
// negative, timeout is zero while n > 0 (WAIT 0 blocks forever), timeout is
// not below the client's ReadTimeout, or the client is neither a
// *redis.Client (single node or Sentinel failover client) nor a
// *redis.ClusterClient.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(c *config) {
		c.ack = replicaAck{n: n, timeout: timeout}
		switch {
		case n < 0:
			c.ack.err = lease.Invalid("replica ack", "%d replicas is negative", n)
		case timeout < 0:
			c.ack.err = lease.Invalid("replica ack", "timeout %v is negative", timeout)
		case n > 0 && timeout == 0:
			c.ack.err = lease.Invalid("replica ack", "zero timeout (WAIT would block forever)")
		}
	}
}

// check validates the setting against client.
func (a replicaAck) check(client redis.UniversalClient) error {
	if a.err != nil || a.n == 0 {
		return a.err
	}
	var rt time.Duration
	switch c := client.(type) {
	case *redis.Client:
		rt = c.Options().ReadTimeout
	case *redis.ClusterClient:
		rt = c.Options().ReadTimeout
	default:
		return lease.Invalid("replica ack", "WAIT needs a *redis.Client or *redis.ClusterClient, not %T", client)
	}
	if rt > 0 && a.timeout >= rt {
		return lease.Invalid("replica ack", "timeout %v is not below the client's ReadTimeout %v", a.timeout, rt)
	}
	return nil
}

// millis is the WAIT timeout in whole milliseconds, rounded up.
func (a replicaAck) millis() int64 { return ttlMillis(a.timeout) }

// short returns the error of a WAIT reply: nil when at least n replicas
// acknowledged.
func (a replicaAck) short(w *redis.IntCmd) error {
	got, err := w.Result()
	if err != nil {
		return fmt.Errorf("%w: WAIT: %w", ErrReplicaAck, err)
	}
	if got < int64(a.n) {
		return fmt.Errorf("%w: %d of %d within %v", ErrReplicaAck, got, a.n, a.timeout)
	}
	return nil
}

// run runs script like Script.Run. With WithReplicaAck it pipelines WAIT
// after the script on the key's primary and returns, besides the script's
// reply, the acknowledgement error (nil when enough replicas acknowledged).
// The acknowledgement only matters for a script that wrote: the caller
// decides.
func (s *Store) run(ctx context.Context, script *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	if s.ack.n == 0 {
		return script.Run(ctx, s.client, keys, args...), nil
	}
	node, err := s.nodeFor(ctx, keys[0])
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd, nil
	}
	cmd, w := s.evalWait(ctx, node, script, true, keys, args)
	if isNoScript(cmd.Err()) {
		cmd, w = s.evalWait(ctx, node, script, false, keys, args) // EVAL caches the script
	}
	s.reloadOnRedirect(ctx, cmd.Err())
	if cmd.Err() != nil {
		return cmd, nil
	}
	return cmd, s.ack.short(w)
}

// evalWait sends EVALSHA (or EVAL) and WAIT in one pipeline on node.
func (s *Store) evalWait(ctx context.Context, node *redis.Client, script *redis.Script, sha bool, keys []string, args []any) (*redis.Cmd, *redis.IntCmd) {
	pipe := node.Pipeline()
	var cmd *redis.Cmd
	if sha {
		cmd = script.EvalSha(ctx, pipe, keys, args...)
	} else {
		cmd = script.Eval(ctx, pipe, keys, args...)
	}
	w := redis.NewIntCmd(ctx, "wait", s.ack.n, s.ack.millis())
	_ = pipe.Process(ctx, w)
	_, _ = pipe.Exec(ctx) // errors are read from each command
	return cmd, w
}

// nodeFor returns the client of the primary that holds key: the store's
// client, or on a Cluster the client of the master of key's slot. WAIT has
// no key, so it must be sent to that node explicitly.
func (s *Store) nodeFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.client.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("cluster node of the key: %w", err)
		}
		return n, nil
	}
	return nil, lease.Invalid("replica ack", "unsupported client %T", s.client) // New rules this out
}

// reloadOnRedirect asks a Cluster client to reload its slot map after a
// reply that says the slot moved or the node is gone: commands sent to one
// node directly bypass the client's own redirection handling.
func (s *Store) reloadOnRedirect(ctx context.Context, err error) {
	c, ok := s.client.(*redis.ClusterClient)
	if !ok || err == nil {
		return
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) || redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK") ||
		redis.HasErrorPrefix(err, "CLUSTERDOWN") || redis.HasErrorPrefix(err, "READONLY") {
		c.ReloadState(ctx)
	}
}

// renewManyAcked is RenewMany with WithReplicaAck: one pipeline of renewals
// followed by WAIT per primary, the primaries one after the other.
func (s *Store) renewManyAcked(ctx context.Context, rs []lease.Request) []error {
	errs := make([]error, len(rs))
	var order []*redis.Client
	groups := map[*redis.Client][]int{}
	for i, r := range rs {
		if err := validate(r, true); err != nil {
			errs[i] = fmt.Errorf("redislease: renew %q: %w", r.Key, err)
			continue
		}
		node, err := s.nodeFor(ctx, s.leaseKey(r.Key))
		if err != nil {
			errs[i] = fmt.Errorf("redislease: renew %q: %w", r.Key, err)
			continue
		}
		if _, ok := groups[node]; !ok {
			order = append(order, node)
		}
		groups[node] = append(groups[node], i)
	}
	for _, node := range order {
		s.renewGroupAcked(ctx, node, rs, groups[node], errs)
	}
	return errs
}

// renewGroupAcked renews rs[i], i in idx, on node, then WAITs; a renewal
// whose script ran without NOSCRIPT is final, the others are sent again with
// EVAL (which caches the script).
func (s *Store) renewGroupAcked(ctx context.Context, node *redis.Client, rs []lease.Request, idx []int, errs []error) {
	for _, sha := range []bool{true, false} {
		if len(idx) == 0 {
			return
		}
		pipe := node.Pipeline()
		cmds := make([]*redis.Cmd, len(idx))
		for j, i := range idx {
			keys, args := []string{s.leaseKey(rs[i].Key)}, []any{leaseToken(rs[i].Token), ttlMillis(rs[i].TTL)}
			if sha {
				cmds[j] = renewScript.EvalSha(ctx, pipe, keys, args...)
			} else {
				cmds[j] = renewScript.Eval(ctx, pipe, keys, args...)
			}
		}
		w := redis.NewIntCmd(ctx, "wait", s.ack.n, s.ack.millis())
		_ = pipe.Process(ctx, w)
		_, _ = pipe.Exec(ctx)
		ackErr := s.ack.short(w)
		var retry []int
		for j, i := range idx {
			if sha && isNoScript(cmds[j].Err()) {
				retry = append(retry, i)
				continue
			}
			s.reloadOnRedirect(ctx, cmds[j].Err())
			n, err := cmds[j].Int64()
			errs[i] = renewResult(rs[i].Key, n, err)
			if errs[i] == nil && ackErr != nil {
				errs[i] = fmt.Errorf("redislease: renew %q: %w", rs[i].Key, ackErr)
			}
		}
		idx = retry
	}
}
