// The nemesis: one fault at a time, in turn, with time to recover between.

package verify

import (
	"context"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leaseurl"
)

func redact(s string) string { return leaseurl.Redact(s) }

// waitFor sleeps d or until ctx ends; it reports whether the full d passed.
func waitFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (r *runner) nemesis(ctx context.Context, rep *Report) {
	ttl := r.cfg.TTL
	faults := r.cfg.Faults
	// Let the workers start (on a loaded machine that takes a while: wait
	// for the first acquisition) and contend before the first fault.
	for !r.started() {
		if !waitFor(ctx, 10*time.Millisecond) {
			return
		}
	}
	if !waitFor(ctx, 2*ttl) {
		return
	}
	// A fault that found nothing to hit (no holder within 2 TTLs, on a
	// loaded machine) is tried again soon, twice at most, before the
	// next: a short run has room for each only once or twice.
	for i, missed := 0, 0; ; {
		if len(faults) == 0 {
			<-ctx.Done()
			return
		}
		kind := faults[i%len(faults)]
		if !r.inject(ctx, kind) {
			if missed++; missed == 3 {
				i, missed = i+1, 0
			}
			if !waitFor(ctx, ttl/4) {
				return
			}
			continue
		}
		rep.Faults[kind]++
		i, missed = i+1, 0
		// Recover: long enough for the lease to change hands.
		if !waitFor(ctx, 2*ttl+time.Duration(rand.Int64N(int64(ttl)))) {
			return
		}
	}
}

// inject injects one fault and reports whether it did.
func (r *runner) inject(ctx context.Context, kind string) bool {
	ttl := r.cfg.TTL
	switch kind {
	case FaultKill, FaultStop:
		pick := r.holderWithin
		if kind == FaultKill && r.cfg.Survivors > 0 {
			pick = r.killableHolderWithin
		}
		id, fence, w := pick(ctx, 2*ttl)
		if w == nil {
			return false
		}
		at := time.Now().UnixNano()
		if kind == FaultKill {
			if w.cmd.Process.Signal(syscall.SIGKILL) != nil {
				return false
			}
			r.note(kind, fence, at)
			r.log("verify: kill -9 worker %d (fence %d)", id, fence)
			<-w.done
			if ctx.Err() == nil {
				if err := r.spawn(id); err != nil {
					r.log("verify: restarting worker %d: %v", id, err)
				}
			}
			return true
		}
		if w.cmd.Process.Signal(syscall.SIGSTOP) != nil {
			return false
		}
		r.note(kind, fence, at)
		r.log("verify: SIGSTOP worker %d (fence %d) for %v", id, fence, 3*ttl/2)
		waitFor(context.Background(), 3*ttl/2)
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		return true
	case FaultLatency, FaultCut:
		id, _, _ := r.holderWithin(ctx, 2*ttl)
		if id < 0 || r.proxies[id] == nil {
			// No holder, or no proxy (file store, multi-host URL): pick any proxied worker.
			id = -1
			for i, p := range r.proxies {
				if p != nil {
					id = i
					break
				}
			}
			if id < 0 {
				return false
			}
		}
		p := r.proxies[id]
		if kind == FaultLatency {
			d := ttl / 4
			r.log("verify: +%v latency for worker %d for %v", d, id, 2*ttl)
			p.SetLatency(d)
			waitFor(ctx, 2*ttl)
			p.SetLatency(0)
			return true
		}
		r.log("verify: cut worker %d from the store for %v", id, 3*ttl/2)
		p.Cut()
		waitFor(ctx, 3*ttl/2)
		p.Restore()
		return true
	case FaultBreak:
		id, fence, w := r.holderWithin(ctx, 2*ttl)
		if w == nil {
			return false
		}
		// A store's Break may refuse when a renewal changed the key
		// meanwhile (NATS: a compare-and-set): try up to three times.
		var at int64
		var k lease.KeyInfo
		var err error
		for try := 0; try < 3 && ctx.Err() == nil; try++ {
			at = time.Now().UnixNano()
			if k, err = r.forceRelease(ctx); err == nil && len(k.Holders) > 0 {
				break
			}
		}
		if err != nil || len(k.Holders) == 0 {
			r.log("verify: forced release of worker %d's lease (fence %d): %v, %d holders", id, fence, err, len(k.Holders))
			return false
		}
		r.note(kind, k.Fence(), at)
		r.log("verify: forced release of worker %d's lease (fence %d)", id, k.Fence())
		return true
	case FaultPartition, FaultOneWay, FaultLoss, FaultPartitionHeal, FaultLeaderPartition:
		return r.injectNet(ctx, kind) // netns.go
	case FaultClockForward, FaultClockBack, FaultClockDrift:
		return r.injectClock(ctx, kind)
	case FaultRestart:
		if r.cfg.Restart == nil {
			return false
		}
		r.log("verify: restarting the store")
		rctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := r.cfg.Restart(rctx); err != nil {
			r.log("verify: store restart failed: %v", err)
			return false
		}
		return true
	}
	return false
}

// forceRelease breaks the run's key, as an operator would, through a Client
// of its own over the store.
func (r *runner) forceRelease(ctx context.Context) (lease.KeyInfo, error) {
	s, err := leaseurl.Open(ctx, r.cfg.Store, leaseurl.WithDefault("prefix", r.cfg.Prefix),
		leaseurl.WithDefault("namespace", r.cfg.Prefix))
	if err != nil {
		return lease.KeyInfo{}, err
	}
	defer s.Close()
	c, err := lease.New(s, lease.WithHolder("verify-operator"))
	if err != nil {
		return lease.KeyInfo{}, err
	}
	defer c.Close()
	return c.ForceRelease(ctx, r.cfg.Prefix+"key")
}

// holderWithin waits up to d for a worker to hold the lease, for the first
// half of d only for a careless one (whose pause leads to stale writes).
func (r *runner) holderWithin(ctx context.Context, d time.Duration) (int, uint64, *worker) {
	start := time.Now()
	deadline := start.Add(d)
	for {
		id, f, w := r.currentHolder(time.Since(start) < d/2)
		if w != nil || time.Now().After(deadline) || ctx.Err() != nil {
			return id, f, w
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *runner) note(kind string, fence uint64, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deaths = append(r.deaths, death{kind: kind, fence: fence, at: at})
}

// started reports whether a worker has acquired the lease yet.
func (r *runner) started() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acquired
}
