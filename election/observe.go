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
// once and then every change it observes, until ctx ends or the Client is
// closed; the channel is then closed. Changes are:
//
//   - a new leader (Held, with a fence larger than every fence delivered
//     before: leaders are delivered in fence order, each at most once, also
//     when one candidate leads two terms in a row);
//   - a vacancy (Held false), when nobody led at the moment it looked.
//     Vacancies are delivered when seen; a hand-off faster than the
//     observation may skip one.
//
// Observe wakes on the store's release announcement of the key (pushed, on
// the Client's one subscription, where the store is a driver.Notifier) and
// then looks for the successor with quick re-inspections for about a TTL;
// otherwise it inspects the key every third of the TTL, and sooner when the
// leader's remaining TTL runs out, since acquisitions and expiries are not
// announced. A leader that held for less than that observation latency may
// be missed; the fences delivered still only grow. Transient store errors
// are retried with backoff. The channel is unbuffered: a slow reader delays
// observation but loses no order.
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
