package lease

import (
	"errors"
	"maps"
	"slices"
)

// Session loss: a store closes a Grant's Lost channel when the session under
// the lease dies. Such a channel is usually shared by every grant of a
// session, so the Client watches each distinct channel with one goroutine.
// A watch left without leases stays for the next grant on its channel,
// unless the Client already has maxLostWatches watches.

const maxLostWatches = 8

var errSessionEnded = errors.New("the store's session ended")

// lostWatch is the watch of one Lost channel; guarded by c.mu. It is live
// while c.lost holds it.
type lostWatch struct {
	ch     <-chan struct{}
	leases map[*Lease]struct{}
	quit   chan struct{} // closed to stop a watch left without leases
}

// watchLostLocked adds l to the watch of ch (c.mu is held). It returns the
// watch if it is new: the caller then runs c.watchLost(w).
func (c *Client) watchLostLocked(l *Lease, ch <-chan struct{}) *lostWatch {
	if w := c.lost[ch]; w != nil {
		w.leases[l], l.watch = struct{}{}, w
		return nil
	}
	w := &lostWatch{ch: ch, leases: map[*Lease]struct{}{l: {}}, quit: make(chan struct{})}
	if c.lost == nil {
		c.lost = make(map[<-chan struct{}]*lostWatch)
	}
	c.lost[ch], l.watch = w, w
	return w
}

// unwatchLostLocked removes l from its watch, if any (c.mu is held).
func (c *Client) unwatchLostLocked(l *Lease) {
	w := l.watch
	if w == nil {
		return
	}
	l.watch = nil
	delete(w.leases, l)
	if len(w.leases) == 0 && len(c.lost) > maxLostWatches && c.lost[w.ch] == w {
		delete(c.lost, w.ch)
		close(w.quit)
	}
}

// watchLost waits for w's channel to close, then loses its leases.
func (c *Client) watchLost(w *lostWatch) {
	select {
	case <-w.ch:
	case <-w.quit:
		return
	case <-c.stop:
		return
	}
	c.mu.Lock()
	if c.lost[w.ch] == w {
		delete(c.lost, w.ch)
	}
	held := slices.Collect(maps.Keys(w.leases))
	c.mu.Unlock()
	c.loseAll(held, LossSession, errSessionEnded)
}
