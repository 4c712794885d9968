// Store clock faults: the nemesis steps the store server's wall clock
// forward and back, and lets it drift, through Config.StepClock (a private
// server under libfaketime in the tests; see internal/faketime).

package verify

import (
	"context"
	"fmt"
	"time"
)

// Store clock fault kinds (they need Config.StepClock).
const (
	// FaultClockForward steps the store's clock forward by 1.5×TTL while a
	// worker holds the lease: the store expires the lease early and lets a
	// second holder in while the first is still working.
	FaultClockForward = "store clock +1.5xTTL"
	// FaultClockBack steps the store's clock back by 1.5×TTL while a
	// worker holds the lease.
	FaultClockBack = "store clock -1.5xTTL"
	// FaultClockDrift makes the store's clock run 20 % fast for 5×TTL
	// (gaining one TTL) in steps of a few milliseconds.
	FaultClockDrift = "store clock drift +20%"
)

// clockFaults are the store clock fault kinds, in report order.
var clockFaults = []string{FaultClockForward, FaultClockBack, FaultClockDrift}

// clockStep is a forward step of the store's clock while worker w held
// the lease with fence.
type clockStep struct {
	at    int64 // when the clock was stepped
	w     int
	fence uint64
}

// injectClock injects one store clock fault and reports whether it did.
func (r *runner) injectClock(ctx context.Context, kind string) bool {
	step := r.cfg.StepClock
	if step == nil {
		return false
	}
	ttl := r.cfg.TTL
	switch kind {
	case FaultClockForward, FaultClockBack:
		wait := 2 * ttl // back: any holder
		if kind == FaultClockForward {
			wait = min(12*ttl, 12*time.Second) // the careless holder, rarer
		}
		id, fence, w := r.clockHolder(ctx, wait)
		if w == nil {
			return false
		}
		d := 3 * ttl / 2
		if kind == FaultClockBack {
			d = -d
		}
		at := time.Now().UnixNano()
		if err := step(ctx, d); err != nil {
			r.log("verify: stepping the store's clock by %v: %v", d, err)
			return false
		}
		r.log("verify: store clock stepped by %v while worker %d holds fence %d", d, id, fence)
		if kind == FaultClockForward {
			r.mu.Lock()
			r.steps = append(r.steps, clockStep{at: at, w: id, fence: fence})
			r.mu.Unlock()
		}
		return true
	case FaultClockDrift:
		const tick = 20 * time.Millisecond
		r.log("verify: store clock drifting +20%% for %v", 5*ttl)
		start, last := time.Now(), time.Now()
		steps := 0
		for time.Since(start) < 5*ttl && waitFor(ctx, tick) {
			now := time.Now()
			if err := step(ctx, now.Sub(last)/5); err != nil {
				r.log("verify: drifting the store's clock: %v", err)
				break
			}
			last = now
			steps++
		}
		return steps > 0 // injected, even if the run ended during the drift
	}
	return false
}

// clockHolder waits up to d for a holder to step the clock under: in the
// first three quarters of d, a careless worker that keeps its leases
// (Hold) and acquired its current one less than a TTL ago, or, at a Hold
// above 12, has three TTLs of its hold left, so that it goes on writing
// with its fence for a while after the step (which may take a second or
// two to reach the server, and the next holder as long to be granted);
// then any holder.
func (r *runner) clockHolder(ctx context.Context, d time.Duration) (int, uint64, *worker) {
	start := time.Now()
	fresh := max(r.cfg.TTL, time.Duration(r.cfg.Hold)*r.cfg.TTL/3-3*r.cfg.TTL) // renew interval TTL/3
	for time.Since(start) < 3*d/4 && ctx.Err() == nil {
		r.mu.Lock()
		for id, f := range r.holder {
			if !r.wcfgs[id].Careless || r.wcfgs[id].Hold == 0 {
				continue
			}
			for i := len(r.recs) - 1; i >= 0; i-- {
				rec := r.recs[i]
				if rec.Op == "acquire" && rec.W == id && rec.Fence == f {
					if time.Since(time.Unix(0, rec.Ret)) < fresh {
						w := r.workers[id]
						r.mu.Unlock()
						return id, f, w
					}
					break
				}
			}
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	return r.holderWithin(ctx, d/4)
}

// earlyGrants counts the forward steps after which another worker acquired
// the key (a larger fence) while the stepped holder still used its lease:
// it began a register operation with its fence after that acquisition.
// Without the step, the store would have kept the lease for the holder,
// which was renewing it.
func earlyGrants(rep *Report, recs []record, steps []clockStep, log func(string, ...any)) {
	for _, s := range steps {
		next := int64(-1)
		for _, rec := range recs {
			if rec.Op == "acquire" && rec.W != s.w && rec.Fence > s.fence && rec.Ret >= s.at && (next < 0 || rec.Ret < next) {
				next = rec.Ret
			}
		}
		if next < 0 {
			continue
		}
		for _, rec := range recs {
			if (rec.Op == "read" || rec.Op == "write") && rec.W == s.w && rec.Fence == s.fence && rec.Call > next {
				rep.EarlyGrants++
				log("verify: %v after the store's clock stepped forward, another worker acquired while worker %d still used fence %d",
					time.Duration(next-s.at).Round(time.Millisecond), s.w, s.fence)
				break
			}
		}
	}
}

// clockLine is the report's line on early grants, "" without forward steps.
func (r *Report) clockLine() string {
	if r.Faults[FaultClockForward] == 0 {
		return ""
	}
	return fmt.Sprintf("early grants       %d of %d forward clock steps let a second holder in while the first still used its lease\n",
		r.EarlyGrants, r.Faults[FaultClockForward])
}
