// Store calls that outlive their caller's context by a short grace.

package lease

import (
	"context"
	"sync"
	"time"
)

// callGrace bounds how long an acquisition's store call may continue after
// the caller's context ended.
const callGrace = time.Second

// graceCtx returns the context for a store call made on behalf of ctx: it
// ends grace after ctx does (or when the returned stop is called), not at
// once. A call already on its way to the store then usually completes and
// its outcome is known, so that the caller can undo it (leave the queue,
// release a grant it will not use) after it happened; were the call
// abandoned, its write could land after the undo and keep the key reserved
// or held by nobody for a whole TTL. The grace uses the real clock, as the
// store's own I/O does.
func graceCtx(ctx context.Context, grace time.Duration) (context.Context, func()) {
	if ctx.Done() == nil {
		return ctx, func() {} // never cancelled: nothing to outlive
	}
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex
		timer *time.Timer
		ended bool
	)
	stopWatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			cause := context.Cause(ctx)
			timer = time.AfterFunc(grace, func() { cancel(cause) })
		}
	})
	return cctx, func() {
		stopWatch()
		mu.Lock()
		ended = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
	}
}
