// Every operation is one round trip: one EVALSHA, and RenewMany one pipeline.

package redislease_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
	"github.com/redis/go-redis/v9"
)

// countHook counts the single commands and pipelines a client sends.
type countHook struct{ singles, pipelines atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.singles.Add(1); return next(ctx, cmd) }
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.pipelines.Add(1); return next(ctx, cmds) }
}

func TestRoundTrips(t *testing.T) {
	c := newClient(t, sharedClient(t).Options().Addr)
	s := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	r, w := req("job", token(t), "h", time.Minute), req("job", token(t), "w", time.Minute)
	w.Queue = true
	batch := make([]driver.Request, 20)
	for i := range batch {
		batch[i] = req(fmt.Sprintf("b%d", i), token(t), "h", time.Minute)
		_, _ = s.Acquire(ctx, batch[i])
	}
	for round := range 2 { // the first round loads the scripts
		hook := &countHook{}
		c.AddHook(hook)
		_, err1 := s.Acquire(ctx, r)
		err2 := s.Renew(ctx, r)
		_, err3 := s.Acquire(ctx, w) // queued: held
		_, err4 := s.Inspect(ctx, "job")
		err5 := s.Release(ctx, r)
		_, err6 := s.Acquire(ctx, w)
		err7 := s.Release(ctx, w)
		if err1 != nil || err2 != nil || err3 == nil || err4 != nil || err5 != nil || err6 != nil || err7 != nil {
			t.Fatalf("round %d: %v %v %v %v %v %v %v", round, err1, err2, err3, err4, err5, err6, err7)
		}
		for _, err := range s.RenewMany(ctx, batch) {
			if err != nil {
				t.Fatal(err)
			}
		}
		if round == 1 && (hook.singles.Load() != 7 || hook.pipelines.Load() != 1) {
			t.Errorf("7 operations and RenewMany sent %d commands and %d pipelines, want 7 and 1",
				hook.singles.Load(), hook.pipelines.Load())
		}
	}
}

// TestBatchRoundTrips: AcquireMany and ReleaseMany are one pipeline of one
// EVALSHA each, and after Redis lost its scripts a batch is sent again only where Redis refused
// it: a release is not repeated (it would then report ErrNotHeld).
func TestBatchRoundTrips(t *testing.T) {
	c := newClient(t, startRedis(t).Addr()) // private: SCRIPT FLUSH below
	s := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	batch := make([]driver.Request, 20)
	for i := range batch {
		batch[i] = req(fmt.Sprintf("m%d", i), token(t), "h", time.Minute)
	}
	for round := range 2 { // the first round loads the scripts
		evalsha := commandStats(t, ctx, c)["evalsha"]
		hook := &countHook{}
		c.AddHook(hook)
		gs, errs := s.AcquireMany(ctx, batch)
		for i, err := range errs {
			if err != nil || gs[i].Fence == 0 {
				t.Fatalf("round %d: AcquireMany[%d] = %+v, %v", round, i, gs[i], err)
			}
		}
		for i, err := range s.ReleaseMany(ctx, batch) {
			if err != nil {
				t.Fatalf("round %d: ReleaseMany[%d] = %v", round, i, err)
			}
		}
		singles, pipelines := hook.singles.Load(), hook.pipelines.Load()
		if calls := commandStats(t, ctx, c)["evalsha"] - evalsha; round == 1 && (singles != 0 || pipelines != 2 || calls != 2) {
			t.Errorf("AcquireMany and ReleaseMany sent %d commands, %d pipelines and %d EVALSHAs, want 0, 2 and 2",
				singles, pipelines, calls)
		}
	}
	if _, errs := s.AcquireMany(ctx, batch); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for i, err := range s.ReleaseMany(ctx, batch) {
		if err != nil {
			t.Errorf("ReleaseMany[%d] after SCRIPT FLUSH = %v, want nil", i, err)
		}
	}
}
