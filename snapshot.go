package lease

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// A Client's own state, for a debug page (package leasedebug): what it holds,
// what it waits for, and its recent events, all kept in memory.

// Snapshot is a Client's state at one instant.
type Snapshot struct {
	Time   time.Time // by the Client's clock
	Holder string    // the Client's default holder
	Closed bool
	// Leases are the held leases, by key.
	Leases []LeaseState
	// Waiters are the acquisitions waiting for a key, longest first.
	Waiters []WaitState
	// Events are the most recent events, oldest first, without their
	// Context; renewals are left out (each lease shows its last one).
	Events []Event
}

// LeaseState is one lease of a Snapshot.
type LeaseState struct {
	Key  string
	Kind Kind // KindExclusive, KindShared or KindSemaphore (Key is the slot's key)
	// ID is the digest of the token, as HolderInfo.ID in Client.List.
	ID       string
	Holder   string
	Fence    uint64
	Acquired time.Time     // when the acquisition was sent
	Held     time.Duration // since Acquired
	// LastRenew is when the last successful renewal (or the acquisition)
	// was sent, Latency that renewal's round trip (0 before the first).
	LastRenew time.Time
	Latency   time.Duration
	Remaining time.Duration // until the local deadline
	Failures  int           // renewals failed since the last success
}

// WaitState is one waiting acquisition of a Snapshot.
type WaitState struct {
	Key  string // the semaphore's key for AcquireSemaphore
	Kind Kind   // KindExclusive, KindShared or KindSemaphore
	// ID is the digest of the queued token, as WaiterInfo.ID in
	// Client.List; "" for a waiter that does not queue.
	ID     string
	Holder string
	Since  time.Time
	Waited time.Duration // since Since
	// HeldBy is the holder the last refusal named ("" if none), Ahead
	// the waiters it counted ahead of this one.
	HeldBy string
	Ahead  int
}

// Snapshot returns the Client's state: its leases, its waiting
// acquisitions and its recent events. It copies them under the Client's
// lock, so it costs a moment of every other call of the Client per lease.
func (c *Client) Snapshot() Snapshot {
	now := c.clock.Now()
	c.mu.Lock()
	s := Snapshot{Time: now, Holder: c.def.holder, Closed: c.closed, Events: c.recent.all()}
	s.Leases = make([]LeaseState, 0, len(c.leases))
	for l := range c.leases {
		s.Leases = append(s.Leases, LeaseState{
			Key: l.req.Key, Kind: l.kind(), Holder: l.p.holder, Fence: l.fence,
			Acquired: l.acquired, LastRenew: l.lastRenew, Latency: l.latency,
			Remaining: max(l.deadline.Sub(now), 0), Failures: l.failures,
			ID: l.req.Token, // digested outside the lock
		})
	}
	s.Waiters = make([]WaitState, 0, len(c.waits))
	for w := range c.waits {
		s.Waiters = append(s.Waiters, *w)
	}
	c.mu.Unlock()

	for i := range s.Leases {
		l := &s.Leases[i]
		l.ID, l.Held = digest(l.ID), now.Sub(l.Acquired)
	}
	for i := range s.Waiters {
		s.Waiters[i].Waited = now.Sub(s.Waiters[i].Since)
	}
	slices.SortFunc(s.Leases, func(a, b LeaseState) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), a.Acquired.Compare(b.Acquired))
	})
	slices.SortFunc(s.Waiters, func(a, b WaitState) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.Key, b.Key))
	})
	return s
}

func (l *Lease) kind() Kind {
	switch {
	case l.req.Shared:
		return KindShared
	case l.p.tag != "":
		return KindSemaphore
	}
	return KindExclusive
}

// startWait records a waiting acquisition of key until endWait.
func (c *Client) startWait(key string, p params, token string, since time.Time) *WaitState {
	w := &WaitState{Key: key, Kind: KindExclusive, Holder: p.holder, Since: since}
	switch {
	case p.shared:
		w.Kind = KindShared
	case p.tag != "":
		w.Kind = KindSemaphore
	}
	if token != "" {
		w.ID = digest(token)
	}
	c.mu.Lock()
	c.waits[w] = struct{}{}
	c.mu.Unlock()
	return w
}

// refusedWait notes who held the key at w's last refusal.
func (c *Client) refusedWait(w *WaitState, held *HeldError) {
	c.mu.Lock()
	w.HeldBy, _ = untag(held.Holder)
	w.Ahead = held.Queued
	c.mu.Unlock()
}

func (c *Client) endWait(w *WaitState) {
	c.mu.Lock()
	delete(c.waits, w)
	c.mu.Unlock()
}

// recentEvents is how many events a Client keeps for Snapshot.
const recentEvents = 100

// eventRing keeps the last recentEvents events but renewals; the Client's
// mutex guards it.
type eventRing struct {
	buf  []Event
	next int // where the next event goes once buf is full
}

func (r *eventRing) add(e Event) {
	if e.Kind == EventRenewed {
		return
	}
	e.Context = nil // a caller's ctx must not outlive its call here
	if len(r.buf) < recentEvents {
		r.buf = append(r.buf, e)
		return
	}
	r.buf[r.next] = e
	r.next = (r.next + 1) % recentEvents
}

// all returns a copy of the events, oldest first.
func (r *eventRing) all() []Event {
	return append(slices.Clone(r.buf[r.next:]), r.buf[:r.next]...)
}
