// Release announcements from a watch of the store's Lease objects
// (driver.Notifier).

package k8slease

import (
	"context"
	"errors"
	"fmt"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasekit/lease/driver"
)

// ErrWatchEnded is returned (wrapped) by Next when the apiserver ended the
// watch (it does so every few minutes): the Client subscribes again.
var ErrWatchEnded = errors.New("k8slease: watch ended")

// Subscribe watches the store's Lease objects from the current
// resourceVersion: each change that leaves one free (Release, Break) is an
// announcement. client-go's watch reader is the subscription's goroutine.
func (s *Store) Subscribe(ctx context.Context) (driver.Subscription, error) {
	sel := labStore + "=" + s.label
	ls, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: sel, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("k8slease: subscribe: %w", err)
	}
	w, err := s.leases.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: ls.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("k8slease: subscribe: %w", err)
	}
	return &subscription{w: w}, nil
}

// subscription is a driver.Subscription over one watch.
type subscription struct{ w watch.Interface }

// Next returns the next key its Lease shows free.
func (sub *subscription) Next(ctx context.Context) (driver.Announcement, error) {
	for {
		select {
		case ev, open := <-sub.w.ResultChan():
			if !open {
				return driver.Announcement{}, fmt.Errorf("k8slease: next: %w", ErrWatchEnded)
			}
			if ev.Type == watch.Error {
				return driver.Announcement{}, fmt.Errorf("k8slease: next: %w: %v", ErrWatchEnded, ev.Object)
			}
			l, ok := ev.Object.(*coordv1.Lease)
			if ok && (ev.Type == watch.Deleted || l.Annotations[annToken] == "") && l.Annotations[annKey] != "" {
				return driver.Announcement{Key: l.Annotations[annKey]}, nil
			}
		case <-ctx.Done():
			return driver.Announcement{}, fmt.Errorf("k8slease: next: %w", ctx.Err())
		}
	}
}

// Close stops the watch and unblocks Next.
func (sub *subscription) Close() error {
	sub.w.Stop()
	return nil
}

var _ driver.Notifier = (*Store)(nil)
