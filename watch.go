package lease

import (
	"cmp"
	"context"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/leasekit/lease/driver"
)

// Watching a store: a live stream of what happens to its keys, made by
// comparing listings, listed again at once when the store announces a
// release.

// ChangeKind says what a Change reports.
type ChangeKind string

// Kinds of changes.
const (
	ChangeAcquired ChangeKind = "acquired" // a new hold (Holder)
	ChangeReleased ChangeKind = "released" // a hold ended before its TTL ran out (Holder)
	ChangeExpired  ChangeKind = "expired"  // a hold's TTL ran out (Holder)
	ChangeBroken   ChangeKind = "broken"   // a hold was broken by an operator (Holder)
	ChangeQueued   ChangeKind = "queued"   // a waiter joined the key's queue (Waiter)
	ChangeLeft     ChangeKind = "left"     // a waiter left the queue: granted, gave up or expired (Waiter)
)

// Change is one change of a watched key, seen at Time by the Client's
// clock.
type Change struct {
	Time   time.Time
	Kind   ChangeKind
	Key    string
	Holder HolderInfo // for holds' changes
	Waiter WaiterInfo // for queued and left
}

// DefaultWatchInterval is how often Watch lists the keys when every is 0.
const DefaultWatchInterval = time.Second

// Watch yields the changes of the keys starting with prefix as they
// happen, until ctx ends (ending the iteration without an error) or the
// iteration stops. It lists the keys every interval (0:
// DefaultWatchInterval), and at once (at most four times an interval) when
// the store announces a release, so a release is seen within milliseconds
// on a store that announces them; a hold that came and went between two
// listings is not seen. The keys present when Watch starts make no change.
// Watch keeps the last listing in memory. Errors of a listing are yielded;
// Watch goes on after them unless the iteration stops.
func (c *Client) Watch(ctx context.Context, prefix string, every time.Duration) iter.Seq2[Change, error] {
	every = cmp.Or(every, DefaultWatchInterval)
	return func(yield func(Change, error) bool) {
		if every < 0 {
			yield(Change{}, Invalid("watch interval", "%v is negative", every))
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		kick := c.watchAnnouncements(ctx, &wg, prefix)
		last, at, err := c.listing(ctx, prefix)
		if err != nil && !yield(Change{}, err) {
			return
		}
		for {
			t := c.clock.NewTimer(every)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			case <-kick:
				t.Stop()
				rest := c.clock.NewTimer(every / 4) // a burst of releases: one listing
				select {
				case <-ctx.Done():
					rest.Stop()
					return
				case <-rest.C():
				}
			}
			now, now0, err := c.listing(ctx, prefix)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if !yield(Change{}, err) {
					return
				}
				continue
			}
			for _, ch := range diff(last, now, now0.Sub(at), now0) {
				if !yield(ch, nil) {
					return
				}
			}
			last, at = now, now0
		}
	}
}

// listing lists prefix into a map, with the time it started.
func (c *Client) listing(ctx context.Context, prefix string) (map[string]KeyInfo, time.Time, error) {
	at := c.clock.Now()
	keys := make(map[string]KeyInfo)
	for k, err := range c.List(ctx, prefix) {
		if err != nil {
			return nil, at, err
		}
		keys[k.Key] = k
	}
	return keys, at, nil
}

// watchAnnouncements returns a channel that receives when the store
// announces a release of a key of prefix (never, if it announces none).
func (c *Client) watchAnnouncements(ctx context.Context, wg *sync.WaitGroup, prefix string) <-chan struct{} {
	kick := make(chan struct{}, 1)
	n, ok := c.store.(driver.Notifier)
	if !ok {
		return kick
	}
	sub, err := n.Subscribe(ctx)
	if err != nil {
		c.log.Warn("lease: watch: no announcements, listing on the interval only", "err", err)
		return kick
	}
	wg.Go(func() {
		defer sub.Close()
		for {
			a, err := sub.Next(ctx)
			if err != nil {
				return // ctx ended, or announcements stopped: the interval goes on
			}
			if len(a.Key) >= len(prefix) && a.Key[:len(prefix)] == prefix {
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}
	})
	return kick
}

// diff returns the changes from listing a to listing b, taken elapsed
// apart, in key order.
func diff(a, b map[string]KeyInfo, elapsed time.Duration, now time.Time) []Change {
	var out []Change
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		was, is := a[key], b[key]
		add := func(kind ChangeKind, h HolderInfo, w WaiterInfo) {
			out = append(out, Change{Time: now, Kind: kind, Key: key, Holder: h, Waiter: w})
		}
		for _, h := range was.Holders {
			if holds(is, h.ID) {
				continue
			}
			switch {
			case slices.Contains(is.Broken, h.ID):
				add(ChangeBroken, h, WaiterInfo{})
			case elapsed >= h.Remaining:
				add(ChangeExpired, h, WaiterInfo{})
			default:
				add(ChangeReleased, h, WaiterInfo{})
			}
		}
		for _, w := range was.Waiters {
			if !slices.ContainsFunc(is.Waiters, func(x WaiterInfo) bool { return x.ID == w.ID }) {
				add(ChangeLeft, HolderInfo{}, w)
			}
		}
		for _, h := range is.Holders {
			if !holds(was, h.ID) {
				add(ChangeAcquired, h, WaiterInfo{})
			}
		}
		for _, w := range is.Waiters {
			if !slices.ContainsFunc(was.Waiters, func(x WaiterInfo) bool { return x.ID == w.ID }) {
				add(ChangeQueued, HolderInfo{}, w)
			}
		}
	}
	return out
}

// holds reports whether k has a hold with id.
func holds(k KeyInfo, id string) bool {
	return slices.ContainsFunc(k.Holders, func(h HolderInfo) bool { return h.ID == id })
}
