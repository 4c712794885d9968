// Long runs: workers the nemesis does not kill, so that the resource
// samples of a long run follow processes that live through all of it.

package verify

import (
	"context"
	"time"
)

// killableHolderWithin is holderWithin for kill -9 when Config.Survivors is
// set: it waits up to d for a holder that is not one of the first Survivors
// workers (those are paused, delayed and cut off like the others, never
// killed).
func (r *runner) killableHolderWithin(ctx context.Context, d time.Duration) (int, uint64, *worker) {
	deadline := time.Now().Add(d)
	for {
		r.mu.Lock()
		best, bf := -1, uint64(0)
		for id, f := range r.holder {
			if id >= r.cfg.Survivors && f > bf {
				best, bf = id, f
			}
		}
		var w *worker
		if best >= 0 {
			w = r.workers[best]
		}
		r.mu.Unlock()
		if w != nil || time.Now().After(deadline) || ctx.Err() != nil {
			return best, bf, w
		}
		time.Sleep(10 * time.Millisecond)
	}
}
