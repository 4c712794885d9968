package lease

import "errors"

// Session loss: a store closes a Grant's Lost channel when the session under
// the lease dies. Such a channel usually belongs to a store's session and is
// shared by every grant made in it (a ZooKeeper session, an etcd lease), so
// the Client watches each distinct channel with one goroutine, not one per
// lease: 10,000 leases in one session cost one goroutine, and an acquisition
// or a release starts or wakes none. A watch whose leases are all gone stays
// for the next grant on its channel, unless the Client already has
// maxLostWatches watches (a store that makes a channel per grant): it then
// stops.

// maxLostWatches bounds the watches kept without leases.
const maxLostWatches = 8

// errSessionEnded is the cause of a LossSession.
var errSessionEnded = errors.New("the store's session ended")

// lostWatch is the watch of one Lost channel; guarded by c.mu.
type lostWatch struct {
	ch     <-chan struct{}
	leases map[*Lease]struct{}
	ended  bool          // out of c.lost: its goroutine has stopped or is stopping
	quit   chan struct{} // closed to stop the goroutine of a watch left without leases
}

// watchLostLocked adds l to the watch of ch (c.mu is held). It returns the
// watch if it is new: the caller starts its goroutine (c.watch) once c.mu is
// released.
func (c *Client) watchLostLocked(l *Lease, ch <-chan struct{}) *lostWatch {
	w := c.lost[ch]
	fresh := w == nil
	if fresh {
		w = &lostWatch{ch: ch, leases: make(map[*Lease]struct{}), quit: make(chan struct{})}
		if c.lost == nil {
			c.lost = make(map[<-chan struct{}]*lostWatch)
		}
		c.lost[ch] = w
	}
	w.leases[l] = struct{}{}
	l.watch = w
	if fresh {
		return w
	}
	return nil
}

// unwatchLostLocked removes l from its watch, if any (c.mu is held).
func (c *Client) unwatchLostLocked(l *Lease) {
	w := l.watch
	if w == nil {
		return
	}
	l.watch = nil
	delete(w.leases, l)
	if w.ended || len(w.leases) > 0 || len(c.lost) <= maxLostWatches {
		return
	}
	delete(c.lost, w.ch)
	w.ended = true
	close(w.quit)
}

// watchLost waits for w's channel to close and then reports every lease of
// the watch lost; it also returns when the watch is stopped or the Client
// closes (after Close released every lease).
func (c *Client) watchLost(w *lostWatch) {
	select {
	case <-w.ch:
	case <-w.quit:
		return
	case <-c.stop:
		return
	}
	c.mu.Lock()
	if !w.ended {
		delete(c.lost, w.ch)
		w.ended = true
	}
	held := make([]*Lease, 0, len(w.leases))
	for l := range w.leases {
		held = append(held, l)
	}
	c.mu.Unlock()
	for _, l := range held {
		c.lose(l, LossSession, errSessionEnded)
	}
}
