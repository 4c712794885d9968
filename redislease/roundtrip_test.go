// Each operation is one command (EVALSHA) and one round trip, queued waiters
// included; RenewMany is one pipeline. Measured on a private server with CONFIG RESETSTAT and INFO
// commandstats, and on the client with a go-redis hook.

package redislease_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/redis/go-redis/v9"
)

// countHook counts what the client sends: dials, single commands and
// pipelines (each of these is one round trip on a single node).
type countHook struct {
	mu        sync.Mutex
	dials     int
	singles   []string // command names
	pipelines [][]string
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.mu.Lock()
		h.dials++
		h.mu.Unlock()
		return next(ctx, network, addr)
	}
}

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.singles = append(h.singles, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name()
		}
		h.mu.Lock()
		h.pipelines = append(h.pipelines, names)
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (h *countHook) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dials, h.singles, h.pipelines = 0, nil, nil
}

// The commands the Lua scripts call: Redis counts them in commandstats too.
var inScript = map[string]bool{
	"hget": true, "hset": true, "get": true, "getset": true, "set": true, "del": true,
	"pexpire": true, "pttl": true, "time": true, "publish": true,
	"zadd": true, "zrem": true, "zrank": true, "zcard": true, "zrange": true, "zrangebyscore": true,
	"exists": true, "zscore": true, "hdel": true,
}

// heldWith returns nil if err is a *lease.HeldError with queued waiters ahead.
func heldWith(err error, queued int) error {
	var he *lease.HeldError
	if !errors.As(err, &he) || he.Queued != queued {
		return fmt.Errorf("got %v, want a HeldError with %d queued ahead", err, queued)
	}
	return nil
}

func TestRoundTrips(t *testing.T) {
	srv := startRedis(t)
	hook := &countHook{}
	c := newClient(t, srv.Addr())
	c.AddHook(hook)
	admin := newClient(t, srv.Addr())
	s := newStore(t, c)
	ctx := testCtx(t, 60*time.Second)

	// Warm up: connections open and every script cached on the server.
	w := req("warm", token(t), "h", time.Minute)
	if _, err := s.Acquire(ctx, w); err != nil {
		t.Fatal(err)
	}
	if errs := s.RenewMany(ctx, []lease.Request{w}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := s.Renew(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Inspect(ctx, "warm"); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, w); err != nil {
		t.Fatal(err)
	}
	batch := make([]lease.Request, 50)
	for i := range batch {
		batch[i] = req(fmt.Sprintf("batch-%02d", i), token(t), "h", time.Minute)
		if _, err := s.Acquire(ctx, batch[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	r := req("job", token(t), "h", time.Minute)
	w1, w2 := req("job", token(t), "w1", time.Minute), req("job", token(t), "w2", time.Minute)
	w1.Queue, w2.Queue = true, true
	ops := []struct {
		name      string
		evalsha   int // commands the server must see
		pipelined int // commands in the client's one pipeline (0: one single command)
		run       func() error
	}{
		{"Acquire", 1, 0, func() error { _, err := s.Acquire(ctx, r); return err }},
		{"Renew", 1, 0, func() error { return s.Renew(ctx, r) }},
		{"RenewMany(50)", 50, 50, func() error {
			for i, err := range s.RenewMany(ctx, batch) {
				if err != nil {
					return fmt.Errorf("[%d]: %w", i, err)
				}
			}
			return nil
		}},
		{"Inspect", 1, 0, func() error { _, err := s.Inspect(ctx, "job"); return err }},
		{"Acquire(queue, held)", 1, 0, func() error { _, err := s.Acquire(ctx, w1); return heldWith(err, 0) }},
		{"Acquire(queue, 1 ahead)", 1, 0, func() error { _, err := s.Acquire(ctx, w2); return heldWith(err, 1) }},
		{"Release", 1, 0, func() error { return s.Release(ctx, r) }},
		{"Acquire(reserved)", 1, 0, func() error {
			_, err := s.Acquire(ctx, req("job", token(t), "x", time.Minute))
			return heldWith(err, 2)
		}},
		{"Release(queued waiter)", 1, 0, func() error {
			if err := s.Release(ctx, w1); !errors.Is(err, lease.ErrNotHeld) {
				return fmt.Errorf("got %v, want ErrNotHeld", err)
			}
			return nil
		}},
		{"Acquire(queue, first)", 1, 0, func() error { _, err := s.Acquire(ctx, w2); return err }},
		{"Release(after queue)", 1, 0, func() error { return s.Release(ctx, w2) }},
	}
	for _, op := range ops {
		if err := admin.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		hook.reset()
		start := time.Now()
		if err := op.run(); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		elapsed := time.Since(start)
		stats := commandStats(t, ctx, admin)
		delete(stats, "config|resetstat")

		hook.mu.Lock()
		dials, singles, pipes := hook.dials, hook.singles, hook.pipelines
		hook.mu.Unlock()
		roundTrips := len(singles) + len(pipes)

		var top []string // commands that can only have come from the client
		for name, n := range stats {
			if name != "evalsha" && !inScript[name] {
				top = append(top, fmt.Sprintf("%s=%d", name, n))
			}
		}
		if stats["evalsha"] != op.evalsha || len(top) > 0 {
			t.Errorf("%s: server saw evalsha=%d and %v, want evalsha=%d only", op.name, stats["evalsha"], top, op.evalsha)
		}
		if dials != 0 || roundTrips != 1 {
			t.Errorf("%s: %d round trips (%d single %v, %d pipelines), %d dials; want 1 round trip, 0 dials",
				op.name, roundTrips, len(singles), singles, len(pipes), dials)
		}
		if op.pipelined == 0 && (len(singles) != 1 || singles[0] != "evalsha") {
			t.Errorf("%s: client sent %v, want one evalsha", op.name, singles)
		}
		if op.pipelined > 0 {
			if len(pipes) != 1 || len(pipes[0]) != op.pipelined || strings.Count(strings.Join(pipes[0], " "), "evalsha") != op.pipelined {
				t.Errorf("%s: client pipelines %v, want one of %d evalsha", op.name, pipes, op.pipelined)
			}
		}
		t.Logf("%s: %d round trip(s), %d dial(s), server: %s (%v)",
			op.name, roundTrips, dials, formatStats(stats), elapsed.Round(time.Microsecond))
	}
}
