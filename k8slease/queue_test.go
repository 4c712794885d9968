// The queue of waiters as Lease objects: one per waiter, outside List and
// the watch, capped by WithMaxWaiters.

package k8slease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/k8slease"
	"github.com/leasekit/lease/leasetest"
)

// TestK8sQueueObjects: each queued token is a Lease object of its own,
// labelled for its key and carrying a ticket once refreshed; a grant and a
// waiter's Release delete it; List shows waiters only as its key's.
func TestK8sQueueObjects(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cs := client(t)
	s := newStore(t, cs, freshPrefix(t))
	ttl := 20 * time.Second
	a, b, c := req("jobs", "A", ttl), req("jobs", "B", ttl), req("jobs", "C", ttl)
	if _, err := s.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	b.Queue, c.Queue = true, true
	leasetest.Queued(t, ctx, s, b, 0)
	leasetest.Queued(t, ctx, s, c, 1)
	leasetest.Queued(t, ctx, s, b, 0) // a refresh: B keeps its place, with its ticket kept
	waiters := func() map[string]map[string]string {
		ls, err := cs.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: "leasekit.io/queue"})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string]string{}
		for _, l := range ls.Items {
			if l.Annotations["leasekit.io/key"] == "jobs" && strings.HasPrefix(l.Name, s.Prefix()) {
				got[l.Annotations["leasekit.io/token"]] = l.Annotations
			}
		}
		return got
	}
	got := waiters()
	if len(got) != 2 || got[b.Token] == nil || got[c.Token] == nil {
		t.Fatalf("waiter objects of %q: %v, want B's and C's", "jobs", got)
	}
	if got[b.Token]["leasekit.io/ticket"] == "" {
		t.Errorf("B's object after a refresh has no ticket: %v", got[b.Token])
	}
	page, _, err := s.List(ctx, "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].Key != "jobs" || len(page[0].Waiters) != 2 || page[0].Waiters[0].Token != b.Token {
		t.Errorf("List = %+v; want one key, jobs, with B then C waiting", page)
	}
	if err := s.Release(ctx, b); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("B's Release while queued = %v, want ErrNotHeld", err)
	}
	if err := s.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, c); err != nil {
		t.Fatalf("C, now first, after A's Release: %v", err)
	}
	if got := waiters(); len(got) != 0 {
		t.Errorf("waiter objects left after B gave up and C was granted: %v", got)
	}
}

// TestK8sQueueCap: WithMaxWaiters caps the live queue; a newcomer beyond
// it gets a *lease.QueueFullError and queues nothing, a waiter already
// queued keeps its place; New refuses a cap out of range.
func TestK8sQueueCap(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cs := client(t)
	s := newStore(t, cs, freshPrefix(t), k8slease.WithMaxWaiters(2))
	if got := s.Caps(); !got.FIFO || got.MaxWaiters != 2 {
		t.Errorf("Caps = %+v, want FIFO with MaxWaiters 2", got)
	}
	ttl := 20 * time.Second
	if _, err := s.Acquire(ctx, req("capped", "holder", ttl)); err != nil {
		t.Fatal(err)
	}
	w1, w2, w3 := req("capped", "w1", ttl), req("capped", "w2", ttl), req("capped", "w3", ttl)
	w1.Queue, w2.Queue, w3.Queue = true, true, true
	leasetest.Queued(t, ctx, s, w1, 0)
	leasetest.Queued(t, ctx, s, w2, 1)
	var qf *lease.QueueFullError
	if _, err := s.Acquire(ctx, w3); !errors.As(err, &qf) || qf.Max != 2 {
		t.Fatalf("a third waiter's Acquire = %v, want a *lease.QueueFullError of 2", err)
	}
	leasetest.Queued(t, ctx, s, w2, 1) // queued already: never refused
	leasetest.Queued(t, ctx, s, w1, 0)
	for _, n := range []int{0, -1, 1<<20 + 1} {
		if _, err := k8slease.New(cs.CoordinationV1(), namespace, k8slease.WithMaxWaiters(n)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("New with WithMaxWaiters(%d) = %v, want ErrInvalid", n, err)
		}
	}
}
