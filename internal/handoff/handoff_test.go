// Waiters without a server: which hand-offs are recorded, what Take grants
// and from when its Since counts.

package handoff

import (
	"testing"
	"time"

	"github.com/leasekit/lease"
)

func queuedReq(key, token string) lease.Request {
	return lease.Request{Key: key, Token: token, TTL: 10 * time.Second, Queue: true}
}

// TestTake: a hand-off to a token queued for the key is granted once, with
// its fence; hand-offs to other tokens or keys, and requests without Queue,
// are not.
func TestTake(t *testing.T) {
	var w Waiters
	w.Refused(queuedReq("k", "b"), time.Now())
	w.Handed("k", "stranger", 5) // not queued here
	w.Handed("other", "b", 6)    // b waits for k, not for other
	if g, ok := w.Take(queuedReq("k", "b")); ok {
		t.Fatalf("Take before any hand-off to b = %+v", g)
	}
	w.Handed("k", "b", 7)
	if g, ok := w.Take(lease.Request{Key: "k", Token: "b", TTL: 10 * time.Second}); ok {
		t.Fatalf("Take without Queue = %+v, want the server asked", g)
	}
	g, ok := w.Take(queuedReq("k", "b"))
	if !ok || g.Fence != 7 || g.Since <= 0 {
		t.Fatalf("Take = %+v, %v; want fence 7 with a positive Since", g, ok)
	}
	if g, ok := w.Take(queuedReq("k", "b")); ok {
		t.Fatalf("second Take = %+v, want the hand-off used up", g)
	}
}

// TestSettle: a settled token's hand-off is forgotten.
func TestSettle(t *testing.T) {
	var w Waiters
	w.Refused(queuedReq("k", "b"), time.Now())
	w.Handed("k", "b", 3)
	w.Settle("b")
	if g, ok := w.Take(queuedReq("k", "b")); ok {
		t.Fatalf("Take after Settle = %+v", g)
	}
	w.Handed("k", "b", 4) // no longer queued
	if g, ok := w.Take(queuedReq("k", "b")); ok {
		t.Fatalf("Take of a hand-off after Settle = %+v", g)
	}
}

// TestSinceFrom: Since counts from the last queueing request, or with
// FromFirst from the first one of the wait; a request sent half the TTL ago
// or more is not granted (the server is asked).
func TestSinceFrom(t *testing.T) {
	first := time.Now().Add(-3 * time.Second)
	last := time.Now().Add(-time.Second)
	for _, fromFirst := range []bool{false, true} {
		w := Waiters{FromFirst: fromFirst}
		w.Refused(queuedReq("k", "b"), first)
		w.Refused(queuedReq("k", "b"), last)
		w.Handed("k", "b", 1)
		g, ok := w.Take(queuedReq("k", "b"))
		want := time.Since(last)
		if fromFirst {
			want = time.Since(first)
		}
		if !ok || g.Since > want || g.Since < want-500*time.Millisecond {
			t.Errorf("FromFirst %v: Take = %+v, %v; want Since about %v", fromFirst, g, ok, want)
		}
	}
	var w Waiters
	w.Refused(queuedReq("k", "b"), time.Now().Add(-5*time.Second))
	w.Handed("k", "b", 1)
	if g, ok := w.Take(queuedReq("k", "b")); ok {
		t.Fatalf("Take of a request sent half the TTL ago = %+v, want the server asked", g)
	}
}

// TestListening counts open subscriptions.
func TestListening(t *testing.T) {
	var w Waiters
	if w.Listening() {
		t.Fatal("a new Waiters listens")
	}
	w.Listen()
	w.Listen()
	w.Unlisten()
	if !w.Listening() {
		t.Fatal("one subscription open, Listening false")
	}
	w.Unlisten()
	if w.Listening() {
		t.Fatal("all subscriptions closed, Listening true")
	}
}

// TestOutcomes: only queueing requests are recorded; a grant settles the
// token, so a later hand-off to it is ignored.
func TestOutcomes(t *testing.T) {
	var w Waiters
	plain := queuedReq("k", "a")
	plain.Queue = false
	w.Refused(plain, time.Now()) // not queued: nothing to hand off to
	w.Handed("k", "a", 1)
	a := queuedReq("k", "a")
	if g, ok := w.Take(a); ok {
		t.Fatalf("Take after a refusal without Queue = %+v", g)
	}
	b := queuedReq("k", "b")
	w.Refused(b, time.Now())
	w.Granted(b) // granted by the server: left the queue
	w.Handed("k", "b", 2)
	if g, ok := w.Take(b); ok {
		t.Fatalf("Take after Granted = %+v", g)
	}
}
