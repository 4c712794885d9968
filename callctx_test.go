package lease

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGraceCtxOutlivesCaller(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cctx, stop := graceCtx(ctx, 200*time.Millisecond)
	defer stop()
	cancel()
	select {
	case <-cctx.Done():
		t.Fatal("the call's context ended with the caller's, without a grace")
	case <-time.After(50 * time.Millisecond):
	}
	select {
	case <-cctx.Done():
		if !errors.Is(context.Cause(cctx), context.Canceled) {
			t.Errorf("cause = %v, want the caller's (context.Canceled)", context.Cause(cctx))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call's context did not end after the grace")
	}
}

func TestGraceCtxStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	cctx, stop := graceCtx(ctx, time.Hour)
	if _, ok := cctx.Deadline(); ok {
		t.Error("the call's context kept the caller's deadline")
	}
	stop()
	select {
	case <-cctx.Done():
	default:
		t.Fatal("stop did not end the call's context")
	}
	stop() // idempotent
	cancel()
}
