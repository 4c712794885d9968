// Pushed announcements (lease.Pusher): a Dial-made store's subscription
// hands the deletion of a watched node to the Client from the connection's
// event callback; Next then only reports the end.

package zklease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
)

func pushTestStore(t *testing.T, opts ...Option) *Store {
	t.Helper()
	srvs := strings.Split(leasetest.Env(t, "LEASE_TEST_ZK_SERVERS"), ",")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts = append([]Option{WithRoot("/leasekit-test/push-" + newTokenForTest(t)[:8])}, opts...)
	s, err := Dial(ctx, srvs, 6*time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pushing opens a subscription of s that pushes into the returned channel,
// closed at cleanup.
func pushing(t *testing.T, s *Store) (lease.Subscription, chan lease.Announcement) {
	t.Helper()
	sub, err := s.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	pushed := make(chan lease.Announcement, 8)
	if !sub.(lease.Pusher).Push(func(a lease.Announcement) { pushed <- a }) {
		t.Fatal("Push on a Dial-made store's subscription = false, want true")
	}
	return sub, pushed
}

func newTokenForTest(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestPushRelease: a queued waiter's watch on the holder's node is pushed
// when the holder releases, naming the waiter; Next announces nothing.
func TestPushRelease(t *testing.T) {
	s := pushTestStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, pushed := pushing(t, s)
	h := lease.Request{Key: "k", Token: newTokenForTest(t), Holder: "H", TTL: time.Second}
	w := lease.Request{Key: "k", Token: newTokenForTest(t), Holder: "W", TTL: time.Second, Queue: true}
	if _, err := s.Acquire(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, w); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("W's Acquire: %v, want ErrHeld", err)
	}
	if err := s.Release(ctx, h); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-pushed:
		if a.Key != "k" || a.Next != w.Token {
			t.Errorf("pushed %+v, want key k naming W", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no announcement pushed within 10s of the release")
	}
	nctx, ncancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer ncancel()
	if a, err := sub.(lease.Announcer).NextAnnouncement(nctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("NextAnnouncement of a pushing subscription = %+v, %v; want only its end", a, err)
	}
	if _, err := s.Acquire(ctx, w); err != nil {
		t.Errorf("W's Acquire after the push: %v", err)
	}
}

// TestPushWatchAfterDeletion: a watch handed to the subscription after its
// node's deletion was pushed (the callback runs before the watch's channel
// gets the event, and before Acquire hands the watch over) is announced at
// once; so is one whose channel already holds its event.
func TestPushWatchAfterDeletion(t *testing.T) {
	s := pushTestStore(t)
	_, pushed := pushing(t, s)
	// As the connection's event callback sees the deletion:
	(&watcher{store: s}).event(zk.Event{Type: zk.EventNodeDeleted, Path: "/r/k/_c_a-0000000001"})
	s.addWatch(watchEntry{ch: make(chan zk.Event, 1), key: "k", path: "/r/k/_c_a-0000000001", token: "tok"})
	full := make(chan zk.Event, 1)
	full <- zk.Event{Type: zk.EventNodeDeleted, Path: "/r/k2/_c_b-0000000002"}
	s.addWatch(watchEntry{ch: full, key: "k2", path: "/r/k2/_c_b-0000000002"})
	s.addWatch(watchEntry{ch: make(chan zk.Event, 1), key: "k3", path: "/r/k3/_c_c-0000000003"})
	for _, want := range []lease.Announcement{{Key: "k", Next: "tok"}, {Key: "k2"}} {
		select {
		case a := <-pushed:
			if a != want {
				t.Errorf("pushed %+v, want %+v", a, want)
			}
		case <-time.After(time.Second):
			t.Fatalf("%+v not pushed", want)
		}
	}
	select {
	case a := <-pushed:
		t.Errorf("pushed %+v for a node that was not deleted", a)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestPushNeedsDial: a Store made by New sees no watch events of its own
// and cannot push.
func TestPushNeedsDial(t *testing.T) {
	d := pushTestStore(t)
	s, err := New(d.Conn(), WithSessionTimeout(6*time.Second), WithRoot(d.Root()))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if sub.(lease.Pusher).Push(func(lease.Announcement) {}) {
		t.Error("Push on a New-made store's subscription = true, want false")
	}
}

// TestHandOffNoRequest: a queued entry right behind the lowest node is the
// lowest once that node is deleted: its store, seeing the deletion in the
// event callback, grants the entry's next Acquire with no request (fence:
// the entry's czxid). An entry further back also watches the node before its
// predecessor: that node's deletion wakes it, its attempt finds its
// predecessor the lowest, and its grant after the next release costs no
// request either.
func TestHandOffNoRequest(t *testing.T) {
	log := &writeLog{}
	w := pushTestStore(t, WithDialer(log.dialer))
	h := pushTestStore(t, WithRoot(w.Root()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, pushed := pushing(t, w)
	req := func(holder string) lease.Request {
		return lease.Request{Key: "k", Token: newTokenForTest(t), Holder: holder, TTL: 3 * time.Second, Queue: true, RecordLater: true}
	}
	hr, second, third := req("H"), req("W2"), req("W3")
	hg, err := h.Acquire(ctx, hr)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []lease.Request{second, third} {
		if _, err := w.Acquire(ctx, r); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("%s's Acquire: %v, want ErrHeld", r.Holder, err)
		}
	}
	if err := h.Release(ctx, hr); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-pushed:
		if a.Next != second.Token || a.Moved {
			t.Fatalf("pushed %+v, want the second entry named as the next holder", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no announcement pushed")
	}
	log.take()
	g, err := w.Acquire(ctx, second)
	if err != nil {
		t.Fatalf("the second entry's Acquire after the release: %v", err)
	}
	if sent := log.take(); len(sent) != 0 {
		t.Errorf("the handed entry's Acquire sent %d requests, want none", len(sent))
	}
	if g.Fence <= hg.Fence || g.Since <= 0 {
		t.Errorf("grant %+v, want a fence above the holder's %d and Since > 0", g, hg.Fence)
	}
	info, err := h.Inspect(ctx, "k")
	if err != nil || !info.Held || info.Holder != "W2" || info.Fence != g.Fence {
		t.Errorf("Inspect after the hand-off = %+v, %v; want held by W2 with fence %d", info, err, g.Fence)
	}
	if err := w.Renew(ctx, second); err != nil {
		t.Errorf("the handed lease's Renew: %v", err)
	}
	// H's release also woke the third entry (its watch on the node before
	// its predecessor); its attempt now finds itself right behind the lowest.
	select {
	case a := <-pushed:
		if a.Next != third.Token || !a.Moved {
			t.Fatalf("pushed %+v, want the third entry named as moved up", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("H's release did not wake the third entry")
	}
	var held *lease.HeldError
	if _, err := w.Acquire(ctx, third); !errors.As(err, &held) || held.Queued != 0 {
		t.Fatalf("the third entry's Acquire while W2 holds: %v, want a HeldError with no waiter ahead", err)
	}
	if err := w.Release(ctx, second); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-pushed:
		if a.Next != third.Token || a.Moved {
			t.Fatalf("pushed %+v, want the third entry named as the next holder", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no announcement for the third entry")
	}
	log.take()
	g3, err := w.Acquire(ctx, third)
	if err != nil {
		t.Fatalf("the third entry's Acquire: %v", err)
	}
	if sent := log.take(); len(sent) != 0 {
		t.Errorf("the third entry's Acquire after W2's release sent %d requests, want none", len(sent))
	}
	if g3.Fence <= g.Fence {
		t.Errorf("the third entry's fence %d, want above W2's %d", g3.Fence, g.Fence)
	}
	if err := w.Release(ctx, third); err != nil {
		t.Fatal(err)
	}
}
