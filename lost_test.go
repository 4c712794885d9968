// Tests of session loss (Grant.Lost): one watch per channel, losses of every
// lease of a session, and watches that stop without leases.
package lease_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// sessionStore is a fault wrapper that hands out a Lost channel with its
// grants: the current session's (closed by end), or a new one per grant.
type sessionStore struct {
	driver.Store
	perGrant bool

	mu       sync.Mutex
	sessions []chan struct{} // the last one is current
}

func newSessionStore(perGrant bool) *sessionStore {
	return &sessionStore{Store: memlease.New(), perGrant: perGrant, sessions: []chan struct{}{make(chan struct{})}}
}

func (s *sessionStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	g, err := s.Store.Acquire(ctx, r)
	if err != nil {
		return g, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perGrant {
		s.sessions = append(s.sessions, make(chan struct{}))
	}
	g.Lost = s.sessions[len(s.sessions)-1]
	return g, nil
}

// end closes the current session's channel and starts a new session.
func (s *sessionStore) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.sessions[len(s.sessions)-1])
	s.sessions = append(s.sessions, make(chan struct{}))
}

func sessionClient(t *testing.T, s driver.Store, rec *events) *lease.Client {
	t.Helper()
	c, err := lease.New(s, lease.WithObserver(rec), lease.WithHolder("test:1"), lease.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// settledGoroutines is the goroutine count once it stops changing (goroutines
// that were told to exit may take a moment).
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 50 {
		time.Sleep(10 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return m
		}
		n = m
	}
	return n
}

func TestSessionLossLosesTheSessionsLeases(t *testing.T) {
	s := newSessionStore(false)
	rec := &events{}
	c := sessionClient(t, s, rec)
	ctx := context.Background()
	var first []*lease.Lease
	for i := range 3 {
		l, err := c.TryAcquire(ctx, fmt.Sprintf("a%d", i))
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, l)
	}
	released, err := c.TryAcquire(ctx, "released")
	if err != nil {
		t.Fatal(err)
	}
	if err := released.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s.end()
	for _, l := range first {
		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: not lost 5s after its session ended", l.Key())
		}
		var le *lease.LostError
		if !errors.As(l.Err(), &le) || le.Reason != lease.LossSession {
			t.Fatalf("%s: Err = %v, want a LossSession", l.Key(), l.Err())
		}
	}
	// A lease's Done closes before its Lost event reaches the observer
	// (observers are called once the Client's lock is released): wait for
	// the events.
	for i, from := 0, 0; i < 3; i++ {
		_, j, ok := rec.Find(from, 5*time.Second, leasetest.Kind("", lease.EventLost))
		if !ok {
			t.Fatalf("%d lost events 5s after the session ended, want 3", i)
		}
		from = j + 1
	}
	if n := rec.Count(0, leasetest.Kind("", lease.EventLost)); n != 3 {
		t.Fatalf("%d lost events, want 3 (the released lease is not lost)", n)
	}
	// A lease of the next session is unaffected by the first one's end.
	l, err := c.TryAcquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := l.Err(); err != nil {
		t.Fatalf("a lease of the new session: Err = %v", err)
	}
	s.end()
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the second session's lease was not lost when it ended")
	}
}

func TestSessionLeasesShareOneWatch(t *testing.T) {
	s := newSessionStore(false)
	c := sessionClient(t, s, &events{})
	ctx := context.Background()
	if _, err := c.TryAcquire(ctx, "warm-up"); err != nil {
		t.Fatal(err)
	}
	before := settledGoroutines()
	const n = 200
	for i := range n {
		if _, err := c.TryAcquire(ctx, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// A goroutine per lease would add n.
	if after := settledGoroutines(); after-before > 5 {
		t.Fatalf("%d goroutines for %d leases of one session", after-before, n)
	}
}

func TestLostWatchesStopWithoutLeases(t *testing.T) {
	s := newSessionStore(true) // a new channel per grant, never closed
	c := sessionClient(t, s, &events{})
	ctx := context.Background()
	before := settledGoroutines()
	for i := range 100 {
		l, err := c.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	// At most a few idle watches stay (lost.go's maxLostWatches, 8).
	if after := settledGoroutines(); after-before > 10 {
		t.Fatalf("%d goroutines left after 100 grants on distinct channels", after-before)
	}
	// A grant on a channel that is already closed is lost at once.
	l, err := c.TryAcquire(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	close(s.sessions[len(s.sessions)-1])
	s.mu.Unlock()
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("not lost after its channel closed")
	}
}
