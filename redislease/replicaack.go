package redislease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
	"github.com/redis/go-redis/v9"
)

// ErrReplicaAck matches the error of a write that the primary applied but
// fewer replicas than WithReplicaAck asks for acknowledged in time. It is
// transient: the Client retries, or releases an acquisition it returned.
var ErrReplicaAck = errors.New("redislease: too few replicas acknowledged the write")

type replicaAck struct {
	n       int
	timeout time.Duration
}

// WithReplicaAck sends WAIT n timeout after every write (acquire, renew,
// release), in the same pipeline on the key's primary, and fails a write
// that fewer than n replicas acknowledged with [ErrReplicaAck]. It narrows
// the window in which a failover loses a lease; it does not close it
// (docs/SECURITY.md). n = 0, the default, sends no WAIT. New refuses a
// negative n or timeout, a zero timeout with n > 0, a timeout not below the
// client's ReadTimeout and clients other than *redis.Client and
// *redis.ClusterClient.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(c *config) { c.ack = replicaAck{n: n, timeout: timeout} }
}

func (a replicaAck) check(client redis.UniversalClient) error {
	rt, known := time.Duration(0), true
	switch c := client.(type) {
	case *redis.Client:
		rt = c.Options().ReadTimeout
	case *redis.ClusterClient:
		rt = c.Options().ReadTimeout
	default:
		known = false
	}
	switch {
	case a.n < 0 || a.timeout < 0:
		return lease.Invalid("replica ack", "%d replicas, timeout %v: negative", a.n, a.timeout)
	case a.n == 0:
		return nil
	case a.timeout == 0:
		return lease.Invalid("replica ack", "zero timeout (WAIT would block forever)")
	case !known:
		return lease.Invalid("replica ack", "WAIT needs a *redis.Client or *redis.ClusterClient, not %T", client)
	case rt > 0 && a.timeout >= rt:
		return lease.Invalid("replica ack", "timeout %v is not below the client's ReadTimeout %v", a.timeout, rt)
	}
	return nil
}

// run runs script. With WithReplicaAck it pipelines WAIT after it on the
// key's primary, and a reply that says the script wrote (a fence, or 1)
// comes with ErrReplicaAck if too few replicas acknowledged.
func (s *Store) run(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	if s.ack.n == 0 {
		return script.Run(ctx, s.client, keys, args...).Result()
	}
	node, ok := s.client.(*redis.Client)
	if cc, cluster := s.client.(*redis.ClusterClient); cluster {
		var err error
		if node, err = cc.MasterForKey(ctx, keys[0]); err != nil {
			return nil, fmt.Errorf("cluster node of the key: %w", err)
		}
	} else if !ok {
		return nil, lease.Invalid("replica ack", "unsupported client %T", s.client) // New rules this out
	}
	var cmd *redis.Cmd
	var wait *redis.IntCmd
	for _, eval := range []func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd{script.EvalSha, script.Eval} {
		pipe := node.Pipeline()
		cmd = eval(ctx, pipe, keys, args...)
		wait = redis.NewIntCmd(ctx, "wait", s.ack.n, ttlMillis(s.ack.timeout))
		_ = pipe.Process(ctx, wait)
		_, _ = pipe.Exec(ctx) // each command keeps its own error
		if !isNoScript(cmd.Err()) {
			break // else EVAL, which caches the script
		}
	}
	v, err := cmd.Result()
	if cc, cluster := s.client.(*redis.ClusterClient); cluster && err != nil {
		cc.ReloadState(ctx) // this node may no longer own the slot
	}
	if _, fence := v.(string); err != nil || !fence && v != int64(1) {
		return v, err // no write to acknowledge
	}
	got, err := wait.Result()
	if err != nil {
		return v, fmt.Errorf("%w: WAIT: %w", ErrReplicaAck, err)
	}
	if got < int64(s.ack.n) {
		return v, fmt.Errorf("%w: %d of %d within %v", ErrReplicaAck, got, s.ack.n, s.ack.timeout)
	}
	return v, nil
}
