package lease

import (
	"context"
	"time"
)

// callGrace bounds how long an acquisition's store call may go on after the
// caller's context ended.
const callGrace = time.Second

// graceCtx returns the context for a store call made for ctx: it ends grace
// after ctx does, or when stop is called. A call on its way then usually
// completes, so that the caller can undo a write that did happen (leave the
// queue, release an unused grant) instead of racing it. The grace uses the
// real clock, as the store's I/O does.
func graceCtx(ctx context.Context, grace time.Duration) (context.Context, func()) {
	if ctx.Done() == nil {
		return ctx, func() {}
	}
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopWatch := context.AfterFunc(ctx, func() {
		time.AfterFunc(grace, func() { cancel(context.Cause(ctx)) }) // a no-op after stop
	})
	return cctx, func() { stopWatch(); cancel(context.Canceled) }
}
