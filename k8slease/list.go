// Listing keys and breaking leases (driver.Lister, driver.Breaker).

package k8slease

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasekit/lease/driver"
)

// List lists the store's keys that start with prefix and are held or have
// a live tombstone: a page is one apiserver list of limit Lease objects of
// the store (by its label), cursor the apiserver's continue token.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	ls, err := s.leases.List(ctx, metav1.ListOptions{
		LabelSelector: labStore + "=" + s.label, Limit: int64(max(limit, 1)), Continue: cursor,
	})
	if err != nil {
		return nil, "", fmt.Errorf("k8slease: list %q: %w", prefix, err)
	}
	now := s.clock.Now()
	var page []driver.Entry
	for i := range ls.Items {
		l := &ls.Items[i]
		if key := l.Annotations[annKey]; strings.HasPrefix(key, prefix) && l.Name == s.name(key) {
			s.saw(l, now)
			if e := s.entry(l); len(e.Holders)+len(e.Broken) > 0 {
				page = append(page, e)
			}
		}
	}
	return page, ls.Continue, nil
}

// entry describes l's key.
func (s *Store) entry(l *coordv1.Lease) driver.Entry {
	e := driver.Entry{Key: l.Annotations[annKey]}
	if left := s.remaining(l); left > 0 {
		e.Holders = []driver.Holder{{Token: l.Annotations[annToken], Holder: holder(l), Fence: fence(l), Remaining: left}}
	}
	if tok, until := tombstone(l); tok != "" && time.Now().Before(until) {
		e.Broken = []string{tok}
	}
	return e
}

// Break frees key whatever token holds it, in one conditional write that
// leaves a tombstone naming the evicted token until its hold would have
// expired (by the breaking host's wall clock: the tombstone only decides
// which error the evicted holder's Renew gets).
func (s *Store) Break(ctx context.Context, key string) (driver.Entry, error) {
	e, err := s.breakKey(ctx, key)
	if err != nil {
		return driver.Entry{}, fmt.Errorf("k8slease: break %q: %w", key, err)
	}
	return e, nil
}

// breakKey is Break, its errors without context.
func (s *Store) breakKey(ctx context.Context, key string) (driver.Entry, error) {
	start := s.clock.Now()
	l, err := s.get(ctx, key)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return driver.Entry{Key: key}, nil
		}
		return driver.Entry{}, err
	}
	e := s.entry(l)
	if len(e.Holders) == 0 {
		return e, nil
	}
	until := time.Now().Add(e.Holders[0].Remaining + time.Second)
	l.Annotations[annBroken] = e.Holders[0].Token + " " + strconv.FormatInt(until.UnixMilli(), 10)
	free(l)
	if err := s.update(ctx, l, start); err != nil {
		return driver.Entry{}, err
	}
	return e, nil
}

var (
	_ driver.Lister  = (*Store)(nil)
	_ driver.Breaker = (*Store)(nil)
)

// Delete deletes key's Lease object, if any, whatever holds it. Fences
// start over at 1 for a key deleted: it is for tests and for operators
// retiring a key nobody uses, never for a key with fenced writes in flight.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.leases.Delete(ctx, s.name(key), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("k8slease: delete %q: %w", key, err)
	}
	return nil
}
