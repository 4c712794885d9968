// Observe: a stream of leadership changes, pushed by release announcements
// where the store makes them and polled otherwise.

package election

import (
	"context"
	"errors"
	"time"

	"github.com/leasekit/lease"
)

// Observe returns a channel that delivers the current leadership state at
// once, then every change it observes, until ctx ends or the Client is
// closed (the channel is then closed): a new leader, with a fence larger than
// every fence delivered before, or a vacancy (Held false). It wakes on the
// key's release announcements and otherwise inspects the key every third of
// the TTL, so a leader that held for less than that may be missed, and a
// fast hand-off may skip a vacancy. The channel is unbuffered.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	go e.observe(ctx, ch)
	return ch
}

func (e *Election) observe(ctx context.Context, ch chan<- Leader) {
	defer close(ch)
	poll := e.ttl / 3
	fast := max(e.ttl/16, 5*time.Millisecond)
	var (
		delivered bool   // something was delivered
		held      bool   // the last delivered state was a leader
		maxFence  uint64 // the largest fence delivered
		burst     time.Time
		failures  int
	)
	send := func(l Leader) bool {
		select {
		case ch <- l:
			delivered, held = true, l.Held
			if l.Held {
				maxFence = l.Fence
			}
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		cur, err := e.Leader(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, lease.ErrClosed) || errors.Is(err, lease.ErrInvalid) {
				return
			}
			failures++
			if _, werr := e.c.WaitRelease(ctx, e.key, backoff(failures, poll)); werr != nil {
				return
			}
			continue
		}
		failures = 0
		switch {
		case cur.Held && cur.Fence > maxFence, cur.Held && !delivered:
			if !send(cur) {
				return
			}
		case !cur.Held && (held || !delivered):
			if !send(cur) {
				return
			}
			burst = time.Now().Add(e.ttl) // a successor usually follows at once
		}
		wait := poll
		if cur.Held && cur.Remaining > 0 {
			wait = min(wait, cur.Remaining+time.Millisecond)
		}
		if time.Now().Before(burst) {
			wait = min(wait, fast)
		}
		announced, err := e.c.WaitRelease(ctx, e.key, wait)
		if err != nil {
			return
		}
		if announced {
			burst = time.Now().Add(e.ttl)
		}
	}
}

// backoff returns the wait before retry n (from 1) of an observation whose
// period is period: doubling from period/8, capped at the period.
func backoff(n int, period time.Duration) time.Duration {
	return min(period/8<<min(n-1, 4), period)
}
