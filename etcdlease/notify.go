// Release announcements: one etcd watch on the store's prefix delivering
// DELETE events (releases and expiries).

package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
)

// errSubClosed is returned by Next after Close.
var errSubClosed = errors.New("etcdlease: subscription closed")

// Subscribe opens one watch on every key under the store's prefix that
// reports deletions only (releases, and expiries of etcd leases), and
// returns once etcd confirmed that the watch is active. The watch requires
// a leader: on a member that loses the quorum it ends, and Next returns an
// error. Each subscription has its own watch stream; Close ends it.
func (s *Store) Subscribe(ctx context.Context) (lease.Subscription, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	w := clientv3.NewWatcher(s.cli)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	// Until the watch is created, ctx bounds it (Watch itself may block while
	// the client connects).
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	ch := w.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	sub := &subscription{s: s, w: w, cancel: cancel, ch: ch, done: make(chan struct{})}
	fail := func(err error) (lease.Subscription, error) {
		_ = sub.Close()
		return nil, fmt.Errorf("etcdlease: subscribe: %w", err)
	}
	select {
	case resp, ok := <-ch:
		switch {
		case !ok:
			return fail(errors.New("the watch closed before it was created"))
		case resp.Err() != nil:
			return fail(resp.Err())
		case !resp.Created:
			return fail(errors.New("the first watch response is not the creation notice"))
		}
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	if !stop() {
		return fail(ctx.Err())
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fail(ErrClosed)
	}
	s.subs[sub] = true
	s.mu.Unlock()
	return sub, nil
}

// subscription is one watch on the store's prefix.
type subscription struct {
	s      *Store
	w      clientv3.Watcher
	cancel context.CancelFunc
	ch     clientv3.WatchChan
	done   chan struct{}
	once   sync.Once

	pending []string // released keys not yet returned; used by Next only
}

// Next returns the next released key (without the prefix), or an error when
// ctx ends, the subscription is closed or the watch broke (announcements may
// then have been missed).
func (sub *subscription) Next(ctx context.Context) (string, error) {
	for len(sub.pending) == 0 {
		select {
		case resp, ok := <-sub.ch:
			if !ok {
				select {
				case <-sub.done:
					return "", errSubClosed
				default:
					return "", errors.New("etcdlease: the watch ended")
				}
			}
			if err := resp.Err(); err != nil {
				return "", fmt.Errorf("etcdlease: watch: %w", err)
			}
			if resp.Canceled {
				return "", errors.New("etcdlease: the watch was cancelled")
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					sub.pending = append(sub.pending, strings.TrimPrefix(string(ev.Kv.Key), sub.s.prefix))
				}
			}
		case <-ctx.Done():
			return "", ctx.Err()
		case <-sub.done:
			return "", errSubClosed
		}
	}
	key := sub.pending[0]
	sub.pending = sub.pending[1:]
	return key, nil
}

// Close ends the watch and waits for its stream to shut down.
func (sub *subscription) Close() error {
	var err error
	sub.once.Do(func() {
		close(sub.done)
		sub.cancel()
		err = sub.w.Close()
		sub.s.mu.Lock()
		delete(sub.s.subs, sub)
		sub.s.mu.Unlock()
	})
	return err
}
