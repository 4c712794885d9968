// Renewal without reads: what the store knows of the keys it granted or
// checked (held), and the watch on its prefix that tells it when one of them
// changed, so that a renewal round is one keep-alive instead of a read of
// every key.

package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// held is what the store knows of a key that it granted or found ours in a
// full check: at revision since, the key carried token, had create revision
// rev, was on etcd lease id (the store's, or a queue entry's after a
// hand-off) and its holder's fence was fence. stale is set when the renewal
// watch reported a change of the key after since (a delete, or a put that
// is not ours on id); the next renewal then reads the key again.
type held struct {
	token string
	rev   int64
	id    clientv3.LeaseID
	since int64
	fence int64
	stale bool
}

// renewWatch is the store's watch on its prefix for renewals (not a
// lease.Subscription: it is read only by the store's own calls, without
// blocking, and its goroutines belong to the etcd client's watcher).
type renewWatch struct {
	w      clientv3.Watcher
	cancel context.CancelFunc
	ch     clientv3.WatchChan
	md     metadata.MD // the watch stream's outgoing metadata (its key in the watcher)

	created  int64 // header revision of the creation notice: every later event is delivered
	progress int64 // every event up to this revision has been read
	lastEv   int64 // revision of the last event read
	pending  bool  // a progress request is unanswered
}

// close ends the watch and its stream.
func (w *renewWatch) close() {
	w.cancel()
	_ = w.w.Close()
}

// record remembers that r.Key carried token with create revision rev and
// fence on etcd lease id at revision since. If the watch already read events
// after since, one of them may have concerned the key: the record starts
// stale.
func (s *Store) record(key, token string, rev int64, id clientv3.LeaseID, since, fence int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recordLocked(key, token, rev, id, since, fence)
}

// recordLocked is record with s.mu held.
func (s *Store) recordLocked(key, token string, rev int64, id clientv3.LeaseID, since, fence int64) {
	if s.closed {
		return
	}
	h := held{token: token, rev: rev, id: id, since: since, fence: fence}
	if w := s.watch; w != nil && w.lastEv > since {
		h.stale = true
	}
	s.held[key] = h
}

// unrecord forgets key.
func (s *Store) unrecord(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, key)
}

// dropHeldLocked forgets the keys recorded on etcd lease id (gone). s.mu is
// held.
func (s *Store) dropHeldLocked(id clientv3.LeaseID) {
	for k, h := range s.held {
		if h.id == id {
			delete(s.held, k)
		}
	}
}

// vouchedLocked reports whether the store can renew r without reading its
// key: the key was recorded as r.Token's on etcd lease id, the watch has
// covered it since (it was running at the record's revision) and reported
// no change of it, and the watch is current (see current). s.mu is held.
func (s *Store) vouchedLocked(key, token string, id clientv3.LeaseID) bool {
	h, ok := s.held[key]
	w := s.watch
	return ok && w != nil && !h.stale && h.token == token && h.id == id && h.since >= w.created
}

// drain reads, without blocking, what the renewal watch delivered: events
// mark the records of the keys they change stale, progress notices advance
// the watch's progress. It returns whether the watch is current: it exists,
// and the progress request of the previous round, if any, was answered (so
// every event up to at least the revision that round's keep-alive saw has
// been read). A broken watch, or one whose progress request went
// unanswered for a whole round, is closed: the next full check starts
// another.
func (s *Store) drain() bool {
	s.mu.Lock()
	w := s.watch
	if w == nil {
		s.mu.Unlock()
		return false
	}
	err := s.readLocked(w)
	if err == nil && w.pending {
		err = errors.New("its progress request was not answered")
	}
	if err != nil {
		s.watch = nil
	}
	s.mu.Unlock()
	if err != nil {
		w.close()
		return false
	}
	return true
}

// readLocked reads what w delivered, without blocking. s.mu is held.
func (s *Store) readLocked(w *renewWatch) error {
	for idle := 0; idle < 2; {
		select {
		case resp, ok := <-w.ch:
			if !ok {
				return errors.New("the watch ended")
			}
			if err := resp.Err(); err != nil {
				return err
			}
			if resp.Canceled || resp.CompactRevision != 0 {
				return errors.New("the watch was cancelled")
			}
			if resp.IsProgressNotify() {
				w.progress = max(w.progress, resp.Header.Revision)
				w.pending = false
			}
			for _, ev := range resp.Events {
				s.eventLocked(ev)
				w.lastEv = max(w.lastEv, ev.Kv.ModRevision)
			}
			idle = 0
		default:
			// The watcher's goroutine hands over one response at a time:
			// give it a chance to offer the next before concluding.
			idle++
			if idle < 2 {
				runtime.Gosched()
			}
		}
	}
	return nil
}

// eventLocked marks stale the record of the key ev changed, unless ev is
// older than the record or is a put that leaves the key ours on the same
// etcd lease (an idempotent Acquire). Queue entries and keys the store does
// not hold are ignored. s.mu is held.
func (s *Store) eventLocked(ev *clientv3.Event) {
	key, _, entry, ok := s.parseKey(ev.Kv.Key)
	if !ok || entry {
		return
	}
	h, ok := s.held[key]
	if !ok || ev.Kv.ModRevision <= h.since {
		return
	}
	if ev.Type == mvccpb.PUT && ev.Kv.CreateRevision == h.rev && clientv3.LeaseID(ev.Kv.Lease) == h.id {
		if token, _ := decode(ev.Kv.Value); token == h.token {
			return
		}
	}
	h.stale = true
	s.held[key] = h
}

// ensureWatch starts the renewal watch if there is none, and waits (within
// half of what remains of ctx) until etcd confirms it. The watch starts at the current revision, so
// that etcd's watcher is synced at once (its progress notices are then exact);
// only records made at or after the creation notice's revision are covered
// by it. On failure the store goes on without a watch: renewals read keys.
func (s *Store) ensureWatch(ctx context.Context) error {
	s.mu.Lock()
	if s.watch != nil || s.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()

	w := clientv3.NewWatcher(s.cli)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	md, _ := metadata.FromOutgoingContext(wctx)
	rw := &renewWatch{w: w, cancel: cancel, md: md}
	// Until the watch is created, half of what remains of ctx bounds it:
	// the other half is for the reads it comes before.
	if dl, ok := ctx.Deadline(); ok {
		var c context.CancelFunc
		ctx, c = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
		defer c()
	}
	stop := context.AfterFunc(ctx, cancel)
	rw.ch = w.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	fail := func(err error) error {
		stop()
		rw.close()
		return fmt.Errorf("renewal watch: %w", err)
	}
	rev, err := awaitCreated(ctx, rw.ch)
	if err != nil {
		return fail(err)
	}
	rw.created, rw.progress = rev, rev
	if !stop() {
		return fail(ctx.Err())
	}
	s.mu.Lock()
	if s.watch != nil || s.closed {
		// Another call started one, or Close ran.
		s.mu.Unlock()
		rw.close()
		return nil
	}
	s.watch = rw
	s.mu.Unlock()
	return nil
}

// askProgress asks the renewal watch, if the keep-alive of this round saw a
// revision (rev) beyond the watch's progress, to report its progress: one
// message on the watch's stream, not waited for; the next round requires the
// answer (see drain). On an idle cluster the revision does not move and
// nothing is sent.
func (s *Store) askProgress(ctx context.Context, rev int64) {
	s.mu.Lock()
	w := s.watch
	if w == nil || w.pending || rev <= w.progress {
		s.mu.Unlock()
		return
	}
	w.pending = true
	s.mu.Unlock()
	// The same outgoing metadata as the watch's, so that the request goes
	// to its stream; ctx bounds the hand-over to the watcher's goroutine.
	if err := w.w.RequestProgress(metadata.NewOutgoingContext(ctx, w.md)); err != nil {
		// Left pending: the next round finds it unanswered and restarts
		// the watch.
		return
	}
}

// closeWatch ends the renewal watch, if any, and forgets the records.
func (s *Store) closeWatch() {
	s.mu.Lock()
	w := s.watch
	s.watch = nil
	clear(s.held)
	s.mu.Unlock()
	if w != nil {
		w.close()
	}
}
