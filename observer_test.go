// Tests of observers: several add up, failed acquisitions are events, and
// events time the calls they report.

package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// TestObserversAddUp: WithObserver given three times delivers every event
// to each observer, in order, and each event to the observers in the order
// they were given.
func TestObserversAddUp(t *testing.T) {
	mem := memlease.New()
	defer mem.Close()
	var first, second leasetest.Recorder
	var order []string // which observer saw each event, in delivery order
	tag := func(name string, next lease.Observer) lease.Observer {
		return lease.ObserverFunc(func(e lease.Event) {
			order = append(order, name) // delivered under the Client's emit lock
			next.Observe(e)
		})
	}
	c, err := lease.New(mem, lease.WithObserver(tag("a", &first)), lease.WithObserver(tag("b", &second)),
		lease.WithObserver(lease.ObserverFunc(func(lease.Event) {})))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	l, err := c.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(ctx, "job"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second TryAcquire = %v, want ErrHeld", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	want := "acquired,acquire_failed,released"
	for name, r := range map[string]*leasetest.Recorder{"first": &first, "second": &second} {
		var kinds []string
		for _, e := range r.Events() {
			kinds = append(kinds, e.Kind.String())
		}
		if got := strings.Join(kinds, ","); got != want {
			t.Errorf("the %s observer saw %s, want %s", name, got, want)
		}
	}
	if got := strings.Join(order, ""); got != "ababab" {
		t.Errorf("delivery order %q, want each event to a then b", got)
	}
}

// TestAcquireFailedEvents: TryAcquire refused, Acquire given up and an
// acquisition after Close are EventAcquireFailed events with the error
// returned and the wait; invalid input is not an event.
func TestAcquireFailedEvents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	other := f.other(t)
	if _, err := other.TryAcquire(ctx, "job", lease.WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	failed := leasetest.Kind("", lease.EventAcquireFailed)

	_, err := f.c.TryAcquire(ctx, "job")
	ev := f.rec.take(t, lease.EventAcquireFailed)
	if ev.Key != "job" || ev.Holder != "test:1" || ev.Fence != 0 || ev.Err != err || !errors.Is(ev.Err, lease.ErrHeld) {
		t.Errorf("refused TryAcquire: event %+v, want key job, holder test:1 and the error returned (%v)", ev, err)
	}

	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := f.c.Acquire(actx, "job")
		done <- err
	}()
	for f.clk.Timers() < 3 { // both heartbeats and the waiter asleep
		time.Sleep(time.Millisecond)
	}
	f.clk.Advance(time.Second)
	cancel()
	err = <-done
	ev = f.rec.take(t, lease.EventAcquireFailed)
	if ev.Err != err || !errors.Is(ev.Err, context.Canceled) || ev.Wait != time.Second {
		t.Errorf("Acquire given up: event %+v, want the error returned (%v) and a wait of 1s", ev, err)
	}

	if _, err := other.TrySemaphore(ctx, "pool", 1); err != nil {
		t.Fatal(err)
	}
	_, err = f.c.TrySemaphore(ctx, "pool", 1)
	if ev = f.rec.take(t, lease.EventAcquireFailed); ev.Key != "pool" || ev.Err != err || !errors.Is(err, lease.ErrHeld) {
		t.Errorf("refused TrySemaphore: event %+v, want key pool and the error returned (%v)", ev, err)
	}

	n := f.rec.Count(0, failed)
	if _, err := f.c.TryAcquire(ctx, ""); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("TryAcquire of an empty key = %v", err)
	}
	if _, err := f.c.AcquireSemaphore(ctx, "sem", 0); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("AcquireSemaphore with n=0 = %v", err)
	}
	if got := f.rec.Count(0, failed); got != n {
		t.Errorf("invalid input made %d EventAcquireFailed, want none", got-n)
	}

	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = f.c.TryAcquire(ctx, "after-close")
	if ev = f.rec.take(t, lease.EventAcquireFailed); ev.Err != err || !errors.Is(ev.Err, lease.ErrClosed) {
		t.Errorf("TryAcquire after Close: event %+v, want the error returned (%v)", ev, err)
	}
}

// slowStore takes d of clk's time over each Acquire and Release.
type slowStore struct {
	driver.Store
	clk *leasetest.FakeClock
	d   time.Duration
}

func (s slowStore) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	s.clk.Advance(s.d)
	return s.Store.Acquire(ctx, r)
}

func (s slowStore) Release(ctx context.Context, r driver.Request) error {
	s.clk.Advance(s.d)
	return s.Store.Release(ctx, r)
}

// TestEventTimesCoverTheCalls: an acquisition's Wait and a release's
// Latency end at the event's Time and include the store's round trip, so a
// tracer can draw both calls whole; a release the store refused carries
// its error; a semaphore's events name it.
func TestEventTimesCoverTheCalls(t *testing.T) {
	clk := leasetest.NewFakeClock()
	mem := memlease.New(memlease.WithClock(clk))
	defer mem.Close()
	var rec leasetest.Recorder
	c, err := lease.New(slowStore{mem, clk, 20 * time.Millisecond}, lease.WithClock(clk), lease.WithObserver(&rec))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	start := clk.Now()
	l, err := c.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	evs := rec.Events()
	if len(evs) != 2 {
		t.Fatalf("events %+v, want acquired and released", evs)
	}
	if acq := evs[0]; acq.Wait != 20*time.Millisecond || !acq.Time.Equal(start.Add(20*time.Millisecond)) {
		t.Errorf("acquired: Wait %v at %v; want 20ms, ending 20ms after the start", acq.Wait, acq.Time.Sub(start))
	}
	if rel := evs[1]; rel.Latency != 20*time.Millisecond || !rel.Time.Equal(start.Add(40*time.Millisecond)) || rel.Err != nil {
		t.Errorf("released: Latency %v at %v, Err %v; want 20ms, ending 40ms after the start, no error", rel.Latency, rel.Time.Sub(start), rel.Err)
	}

	l, err = c.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Release(ctx, driver.Request{Key: "job", Token: l.Token()}); err != nil {
		t.Fatal(err)
	}
	relErr := l.Release(ctx)
	ev, _, _ := rec.Find(3, 0, leasetest.Kind("job", lease.EventReleased))
	if relErr == nil || !errors.Is(ev.Err, lease.ErrNotHeld) {
		t.Errorf("release of a token the store no longer held: %v, event Err %v; want ErrNotHeld in the event", relErr, ev.Err)
	}

	s, err := c.TrySemaphore(ctx, "pool", 2)
	if err != nil {
		t.Fatal(err)
	}
	if ev, _, ok := rec.Find(0, 0, leasetest.Kind(s.Key(), lease.EventAcquired)); !ok || ev.Semaphore != "pool" {
		t.Errorf("a slot's acquired event %+v, want Semaphore pool", ev)
	}
	if _, err := c.TryAcquire(ctx, "job#sem0"); err != nil {
		t.Fatal(err)
	}
	if ev, _, _ := rec.Find(0, 0, leasetest.Kind("job#sem0", lease.EventAcquired)); ev.Semaphore != "" {
		t.Errorf("a plain key that looks like a slot: Semaphore %q, want none", ev.Semaphore)
	}
}
