package fifo

import (
	"errors"
	"slices"
	"testing"

	"github.com/leasekit/lease"
)

func tokens(q []Waiter) []string {
	var ts []string
	for _, w := range q {
		ts = append(ts, w.Token)
	}
	return ts
}

// TestQueue: arrival order, refresh in place, the cap for new tokens only,
// expiry and removal.
func TestQueue(t *testing.T) {
	var q []Waiter
	var err error
	for i, tok := range []string{"a", "b", "c"} {
		if q, err = Enqueue(q, "k", Waiter{Token: tok, Expires: int64(10 + i)}, 3); err != nil {
			t.Fatalf("Enqueue(%s): %v", tok, err)
		}
	}
	if q, err = Enqueue(q, "k", Waiter{Token: "a", Expires: 20}, 3); err != nil || Ahead(q, "a") != 0 || q[0].Expires != 20 {
		t.Fatalf("refresh of a: %v, queue %+v; want a first until 20", err, q)
	}
	_, err = Enqueue(q, "k", Waiter{Token: "d", Expires: 30}, 3)
	var full *lease.QueueFullError
	if !errors.Is(err, lease.ErrQueueFull) || !errors.As(err, &full) || full.Key != "k" || full.Max != 3 {
		t.Fatalf("Enqueue beyond the cap = %v, want a QueueFullError for k, max 3", err)
	}
	if n := Ahead(q, "c"); n != 2 {
		t.Errorf("Ahead(c) = %d, want 2", n)
	}
	if n := Ahead(q, "d"); n != 3 {
		t.Errorf("Ahead(d), not queued = %d, want 3", n)
	}
	if live := Live(q, 11); !slices.Equal(tokens(live), []string{"a", "c"}) {
		t.Errorf("Live at 11 = %v, want [a c] (b expired at 11)", tokens(live))
	}
	if live := Live(q, 20); live != nil {
		t.Errorf("Live at 20 = %v, want nil", tokens(live))
	}
	rest, ok := Dequeue(q, "b")
	if !ok || !slices.Equal(tokens(rest), []string{"a", "c"}) || !slices.Equal(tokens(q), []string{"a", "b", "c"}) {
		t.Errorf("Dequeue(b) = %v, %v (queue now %v); want [a c], true, the queue unchanged", tokens(rest), ok, tokens(q))
	}
	if _, ok := Dequeue(rest, "b"); ok {
		t.Errorf("Dequeue of a token not queued reported true")
	}
}

// TestShared: only exclusive entries ahead count for a reader, and only an
// exclusive head is named next.
func TestShared(t *testing.T) {
	q := []Waiter{{Token: "r1", Shared: true}, {Token: "w1"}, {Token: "r2", Shared: true}, {Token: "w2"}}
	for tok, want := range map[string]int{"r1": 0, "w1": 0, "r2": 1, "w2": 1, "new": 2} {
		if n := WritersAhead(q, tok); n != want {
			t.Errorf("WritersAhead(%s) = %d, want %d", tok, n, want)
		}
	}
	if n := Next(q); n != "" {
		t.Errorf("Next with a shared head = %q, want \"\"", n)
	}
	if n := Next(q[1:]); n != "w1" {
		t.Errorf("Next with an exclusive head = %q, want w1", n)
	}
	if n := Next(nil); n != "" {
		t.Errorf("Next of an empty queue = %q, want \"\"", n)
	}
}
