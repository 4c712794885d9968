// Tests of the core engine with the in-memory store and a fake clock: the
// heartbeat, the local deadline, batching, orphans, options and events.
package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// events wraps a leasetest.Recorder with a cursor, to take events in order.
type events struct {
	leasetest.Recorder
	next int
}

// take waits (in real time) for the next event of kind k after the cursor.
func (r *events) take(t *testing.T, k lease.EventKind) lease.Event {
	t.Helper()
	ev, i, ok := r.Find(r.next, 5*time.Second, leasetest.Kind("", k))
	if !ok {
		t.Fatalf("no %v event within 5s", k)
	}
	r.next = i + 1
	return ev
}

func (r *events) kinds() []string {
	var s []string
	for _, e := range r.Events() {
		s = append(s, e.Kind.String())
	}
	return s
}

type fixture struct {
	clk   *leasetest.FakeClock
	mem   *memlease.Store
	fault *leasetest.FaultyStore
	rec   *events
	c     *lease.Client
}

func newFixture(t *testing.T, opts ...lease.Option) *fixture {
	t.Helper()
	f := &fixture{clk: leasetest.NewFakeClock(), rec: &events{}}
	f.mem = memlease.New(memlease.WithClock(f.clk))
	f.fault = leasetest.Faulty(f.mem)
	opts = append([]lease.Option{lease.WithClock(f.clk), lease.WithObserver(f.rec), lease.WithHolder("test:1")}, opts...)
	c, err := lease.New(f.fault, opts...)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	t.Cleanup(func() {
		f.fault.BlockRenewals(false)
		f.fault.FailRenewals(nil)
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		_ = f.mem.Close()
	})
	return f
}

// other returns a second client over the same store, without faults.
func (f *fixture) other(t *testing.T) *lease.Client {
	t.Helper()
	c, err := lease.New(f.mem.Handle(), lease.WithClock(f.clk), lease.WithHolder("other:2"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// dropToken deletes l's token from the store behind the Client's back (an
// operator, a store fail-over) and runs the heartbeat round of l's TTL ttl,
// which loses l; it returns the loss event.
func (f *fixture) dropToken(t *testing.T, l *lease.Lease, ttl time.Duration) lease.Event {
	t.Helper()
	if err := f.mem.Release(context.Background(), driver.Request{Key: l.Key(), Token: l.Token()}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(ttl / 3)
	return f.rec.take(t, lease.EventLost)
}

func TestHeartbeatKeepsLeaseOnFakeClock(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "job", lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f.rec.take(t, lease.EventAcquired)
	other := f.other(t)
	interval := 10 * time.Second / 3
	for i := 0; i < 12; i++ { // 40 s of fake time, 4×TTL
		f.clk.Advance(interval)
		e := f.rec.take(t, lease.EventRenewed)
		if e.Fence != l.Fence() || e.Key != "job" {
			t.Fatalf("renewed event %+v", e)
		}
		if _, err := other.TryAcquire(ctx, "job"); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("round %d: other TryAcquire = %v, want ErrHeld", i, err)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err after 4×TTL = %v", err)
	}
	if r := l.Remaining(); r <= 10*time.Second-interval-time.Second || r > 10*time.Second {
		t.Fatalf("Remaining = %v", r)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.rec.kinds(), ","); !strings.HasPrefix(got, "acquired,renewed") || !strings.HasSuffix(got, "renewed,released") {
		t.Fatalf("events %s", got)
	}
}

func TestStalledRenewalsLoseBeforeStoreExpiry(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ttl := 10 * time.Second
	start := f.clk.Now()
	l, err := f.c.TryAcquire(ctx, "job", lease.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	f.fault.BlockRenewals(true) // a SIGSTOP-like stall: renewals never reach the store
	other := f.other(t)
	var taken time.Time
	for step := 0; step < 200 && taken.IsZero(); step++ {
		f.clk.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond) // let the heartbeat see this instant
		now := f.clk.Now()
		if now.Sub(start) >= ttl-ttl/10-time.Millisecond {
			// Past the local deadline: the loss must be reported now, before
			// the other client is allowed to try.
			select {
			case <-l.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("not lost at %v after acquire (deadline passed)", now.Sub(start))
			}
		}
		if l2, err := other.TryAcquire(ctx, "job"); err == nil {
			taken = now
			select {
			case <-l.Done():
			default:
				t.Fatal("another client acquired while the first lease was not yet reported lost")
			}
			if l2.Fence() <= l.Fence() {
				t.Fatalf("fence %d after %d", l2.Fence(), l.Fence())
			}
		}
	}
	if taken.IsZero() {
		t.Fatal("the key never expired in the store")
	}
	lost := f.rec.take(t, lease.EventLost)
	if lost.Reason != lease.LossDeadline || lost.Time.After(taken) {
		t.Fatalf("lost event %+v, taken at %v", lost, taken)
	}
	var le *lease.LostError
	if !errors.As(l.Err(), &le) || le.Reason != lease.LossDeadline || !errors.Is(l.Err(), lease.ErrLost) {
		t.Fatalf("Err = %v", l.Err())
	}
	if c := context.Cause(l.Context()); !errors.Is(c, lease.ErrLost) {
		t.Fatalf("Cause = %v", c)
	}
	if l.Remaining() != 0 {
		t.Fatalf("Remaining after loss = %v", l.Remaining())
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release after loss = %v", err)
	}
	if info, err := other.Inspect(ctx, "job"); err != nil || !info.Held || info.Holder != "other:2" {
		t.Fatalf("release after loss disturbed the new holder: %+v %v", info, err)
	}
}

func TestTransientRenewFailuresAreRetried(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "job", lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f.fault.FailRenewals(errors.New("connection reset"))
	f.clk.Advance(10 * time.Second / 3)
	e := f.rec.take(t, lease.EventRenewFailed)
	if e.Err == nil || !strings.Contains(e.Err.Error(), "connection reset") {
		t.Fatalf("renew failed event %+v", e)
	}
	// Retries come quickly (backoff from renew/16), not a whole interval later:
	// two more attempts within 2 s of fake time.
	before := f.fault.Renewals()
	for fake := time.Duration(0); fake < 2*time.Second && f.fault.Renewals() < before+2; fake += 100 * time.Millisecond {
		f.clk.Advance(100 * time.Millisecond)
		for wait := time.Now().Add(time.Second); f.clk.Timers() == 0 && time.Now().Before(wait); {
			time.Sleep(100 * time.Microsecond) // the heartbeat re-arms its timer after each round
		}
		time.Sleep(2 * time.Millisecond)
	}
	if f.fault.Renewals() < before+2 {
		t.Fatalf("renewals not retried within 2s of fake time: %d -> %d", before, f.fault.Renewals())
	}
	f.fault.FailRenewals(nil)
	f.clk.Advance(time.Second)
	f.rec.take(t, lease.EventRenewed)
	if l.Err() != nil {
		t.Fatalf("lease lost after a recovered failure: %v", l.Err())
	}
}

func TestStoreLosingTokenLosesAtOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "job", lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	e := f.dropToken(t, l, 10*time.Second)
	if e.Reason != lease.LossNotHeld || !errors.Is(l.Err(), lease.ErrNotHeld) {
		t.Fatalf("lost event %+v, Err %v", e, l.Err())
	}
	<-l.Done()
}

func TestBatchedRenewalsConverge(t *testing.T) {
	clk := leasetest.NewFakeClock()
	mem := memlease.New(memlease.WithClock(clk))
	defer mem.Close()
	counted := &batchCounter{Store: mem, clk: clk}
	c, err := lease.New(counted, lease.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	ttl := 9 * time.Second
	interval := ttl / 3
	start := clk.Now()
	var ls []*lease.Lease
	for i := 0; i < 30; i++ { // acquired over 3 s of fake time
		l, err := c.TryAcquire(ctx, fmt.Sprintf("k%d", i), lease.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		clk.Advance(100 * time.Millisecond)
	}
	const intervals = 30
	for clk.Now().Sub(start) < intervals*interval {
		clk.Advance(50 * time.Millisecond)
		time.Sleep(200 * time.Microsecond)
		counted.settle(t)
	}
	for _, l := range ls {
		if l.Err() != nil {
			t.Fatalf("%s lost: %v", l.Key(), l.Err())
		}
	}
	// Over the last 20 intervals, all 30 leases must be renewed in at most one
	// call per interval (+1 for a call that lands on a window's edge).
	calls := counted.since(start.Add(10 * interval))
	if calls > 20+1 {
		t.Fatalf("%d RenewMany calls in 20 renew intervals for 30 leases: not converged to one round trip per interval", calls)
	}
	if calls < 19 {
		t.Fatalf("only %d RenewMany calls in 20 intervals: leases were not renewed every interval", calls)
	}
	t.Logf("%d RenewMany calls in the last 20 intervals, %d in all", calls, counted.since(start))
}

// TestFailedBatchRetriesTogether: the leases one RenewMany call failed to
// renew retry in one call, not in one call per lease (each at its own
// jittered backoff).
func TestFailedBatchRetriesTogether(t *testing.T) {
	clk := leasetest.NewFakeClock()
	mem := memlease.New(memlease.WithClock(clk))
	defer mem.Close()
	counted := &batchCounter{Store: mem, clk: clk}
	counted.failHalf.Store(true)
	c, err := lease.New(counted, lease.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	start := clk.Now()
	for i := 0; i < 20; i++ {
		if _, err := c.TryAcquire(ctx, fmt.Sprintf("k%d", i), lease.WithTTL(9*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	// The round at 3 s fails half the leases; their retry comes within
	// renew/16 = 187.5 ms. Small steps: leases retrying at different times
	// would be seen as separate calls.
	for clk.Now().Sub(start) < 3500*time.Millisecond {
		clk.Advance(5 * time.Millisecond)
		time.Sleep(200 * time.Microsecond)
		counted.settle(t)
	}
	if n := counted.since(start); n != 2 {
		t.Fatalf("%d RenewMany calls in 3.5 s (a round failing 10 of 20 leases, then their retries), want 2", n)
	}
}

// batchCounter records the fake time of every RenewMany call and makes sure
// the heartbeat has finished reacting before the test moves the clock on.
type batchCounter struct {
	*memlease.Store
	clk      *leasetest.FakeClock
	mu       sync.Mutex
	at       []time.Time
	inflight atomic.Int64 // RenewMany calls running (a WaitGroup's Wait must not race with Add from zero)
	failHalf atomic.Bool  // the next call fails every other lease
}

func (b *batchCounter) RenewMany(ctx context.Context, rs []driver.Request) []error {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	b.mu.Lock()
	b.at = append(b.at, b.clk.Now())
	b.mu.Unlock()
	errs := b.Store.RenewMany(ctx, rs)
	if b.failHalf.CompareAndSwap(true, false) {
		for i := 0; i < len(errs); i += 2 {
			errs[i] = errors.New("no answer")
		}
	}
	return errs
}

func (b *batchCounter) settle(t *testing.T) {
	deadline := time.Now().Add(5 * time.Second)
	for b.clk.Timers() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	for b.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
}

func (b *batchCounter) since(from time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, at := range b.at {
		if !at.Before(from) {
			n++
		}
	}
	return n
}

func TestAmbiguousAcquireLeavesNoOrphan(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	amb := &ambiguous{Store: f.mem.Handle()}
	c, err := lease.New(amb, lease.WithClock(f.clk))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.TryAcquire(ctx, "job"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryAcquire = %v, want the store's DeadlineExceeded", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := f.mem.Inspect(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if !info.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the write of the failed acquire is still held: an orphan")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ambiguous applies Acquire and then reports a timeout, as a store does when
// the reply is lost after the write.
type ambiguous struct{ driver.Store }

func (a *ambiguous) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if _, err := a.Store.Acquire(ctx, r); err != nil {
		return driver.Grant{}, err
	}
	return driver.Grant{}, context.DeadlineExceeded
}

func TestReleaseWaitsForInflightRenewal(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "job", lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f.fault.BlockRenewals(true)
	before := f.fault.Renewals()
	f.clk.Advance(10 * time.Second / 3)
	for f.fault.Renewals() == before {
		time.Sleep(time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- l.Release(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("Release returned %v while a renewal was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	f.fault.BlockRenewals(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	n := f.fault.Renewals()
	f.clk.Advance(time.Minute)
	time.Sleep(20 * time.Millisecond)
	if f.fault.Renewals() != n {
		t.Fatal("a renewal ran after Release returned")
	}
	if !errors.Is(l.Err(), lease.ErrReleased) || !errors.Is(l.Release(ctx), lease.ErrReleased) {
		t.Fatalf("Err = %v", l.Err())
	}
}

func TestDoReportsLossDuringWork(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	err := f.c.Do(ctx, "job", func(ctx context.Context, l *lease.Lease) error {
		f.fault.BlockRenewals(true)
		f.clk.Advance(11 * time.Second)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			return errors.New("fn's ctx not cancelled on loss")
		}
		return nil
	}, lease.WithTTL(10*time.Second))
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Do = %v, want ErrLost", err)
	}
}

func TestInvalidInput(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := lease.New(nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New(nil) = %v", err)
	}
	for name, opts := range map[string][]lease.Option{
		"ttl below min":    {lease.WithTTL(time.Millisecond)},
		"negative ttl":     {lease.WithTTL(-time.Second)},
		"renew >= ttl":     {lease.WithTTL(time.Second), lease.WithRenewInterval(time.Second)},
		"negative renew":   {lease.WithRenewInterval(-1)},
		"drift too big":    {lease.WithTTL(time.Second), lease.WithDriftMargin(600 * time.Millisecond)},
		"negative drift":   {lease.WithDriftMargin(-time.Millisecond)},
		"renew spins":      {lease.WithRenewInterval(time.Nanosecond)},
		"nil observer":     {lease.WithObserver(nil)},
		"nil logger":       {lease.WithLogger(nil)},
		"nil clock":        {lease.WithClock(nil)},
		"nil option":       {nil},
		"holder too large": {lease.WithHolder(strings.Repeat("h", 513))},
	} {
		if _, err := lease.New(f.mem, opts...); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
	var ie *lease.InvalidError
	for name, key := range map[string]string{
		"empty": "", "too long": strings.Repeat("k", 513), "bad utf8": "a\xffb", "nul": "a\x00b",
	} {
		_, err := f.c.TryAcquire(ctx, key)
		if !errors.Is(err, lease.ErrInvalid) || !errors.As(err, &ie) || ie.Field != "key" {
			t.Errorf("%s key: TryAcquire = %v", name, err)
		}
		if _, err := f.c.Acquire(ctx, key); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%s key: Acquire = %v", name, err)
		}
	}
	if _, err := f.c.TryAcquire(ctx, "k", lease.WithTTL(time.Millisecond)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("per-acquire TTL 1ms: %v", err)
	}
	// On an acquisition, WithTTL(0) means the Client's TTL, not the default.
	c5, err := lease.New(f.mem, lease.WithTTL(5*time.Second), lease.WithClock(f.clk))
	if err != nil {
		t.Fatal(err)
	}
	defer c5.Close()
	if l, err := c5.TryAcquire(ctx, "ttl-zero", lease.WithTTL(0)); err != nil {
		t.Errorf("TryAcquire with WithTTL(0): %v", err)
	} else if l.TTL() != 5*time.Second {
		t.Errorf("TryAcquire with WithTTL(0) on a 5s client: TTL %v, want 5s", l.TTL())
	}
	if err := f.c.Do(ctx, "k", nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Do(nil fn) = %v", err)
	}
	// A store's own limits apply too.
	small := memlease.New(memlease.WithLimits(driver.Caps{MinTTL: time.Second, MaxKeyLen: 4}))
	defer small.Close()
	c, err := lease.New(small)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.TryAcquire(ctx, "12345"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("key over store limit: %v", err)
	}
	if _, err := c.TryAcquire(ctx, "k", lease.WithTTL(500*time.Millisecond)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("TTL under store minimum: %v", err)
	}
	if _, err := lease.New(small, lease.WithTTL(100*time.Millisecond)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("client TTL under store minimum: %v", err)
	}
}

func TestHeldErrorTellsHolder(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "job", lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(2 * time.Second)
	_, err = f.other(t).TryAcquire(ctx, "job")
	var he *lease.HeldError
	if !errors.As(err, &he) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("TryAcquire = %v", err)
	}
	if he.Holder != "test:1" || he.Fence != l.Fence() || he.Remaining != 8*time.Second {
		t.Fatalf("HeldError %+v", he)
	}
	if !strings.Contains(err.Error(), `"test:1"`) {
		t.Fatalf("message %q does not name the holder", err)
	}
}

// TestAcquireGaveUpSaysWhoHeld: an Acquire whose ctx ends while it waits
// returns the last refusal with the wait and the cause, matching both.
func TestAcquireGaveUpSaysWhoHeld(t *testing.T) {
	f := newFixture(t)
	other := f.other(t)
	if _, err := other.TryAcquire(context.Background(), "job", lease.WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := f.c.Acquire(ctx, "job")
		done <- err
	}()
	for f.clk.Timers() < 3 { // both heartbeats and the waiter asleep
		time.Sleep(time.Millisecond)
	}
	f.clk.Advance(1500 * time.Millisecond) // less than the waiter's sleep
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return after its ctx was cancelled")
	}
	want := `lease: acquire "job": gave up after 1.5s: key "job" is held by "other:2" (fence 1): context canceled`
	if err == nil || err.Error() != want {
		t.Fatalf("Acquire = %v, want %s", err, want)
	}
	var he *lease.HeldError
	if !errors.Is(err, context.Canceled) || !errors.Is(err, lease.ErrHeld) || !errors.As(err, &he) {
		t.Fatalf("Acquire = %v, want a *HeldError matching ErrHeld and context.Canceled", err)
	}
	if he.Waited != 1500*time.Millisecond || he.Holder != "other:2" || he.Fence != 1 || he.Self {
		t.Errorf("HeldError = %+v", *he)
	}
}

// TestOwnKeyRefusedToWaitingSibling: two goroutines of one Client wait for
// a key another client holds; once it is released one of them gets it, and
// the other is refused when it looks again (HeldError.Self) instead of
// waiting for its own Client's lease until its ctx ends.
func TestOwnKeyRefusedToWaitingSibling(t *testing.T) {
	mem := memlease.New()
	defer mem.Close()
	newClient := func(holder string) *lease.Client {
		c, err := lease.New(mem.Handle(), lease.WithTTL(300*time.Millisecond), lease.WithHolder(holder))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c, other, probe := newClient("me"), newClient("other"), newClient("probe")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := other.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *lease.Lease
		err error
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			l, err := c.Acquire(ctx, "job")
			results <- result{l, err}
		}()
	}
	// Both queued behind the holder.
	for {
		var he *lease.HeldError
		if _, err := probe.TryAcquire(ctx, "job"); !errors.As(err, &he) {
			t.Fatalf("probe TryAcquire = %v, want a HeldError", err)
		} else if he.Queued >= 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var won *lease.Lease
	var refused error
	for range 2 {
		select {
		case r := <-results:
			if r.err == nil {
				won = r.l
			} else {
				refused = r.err
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter of the Client that got the key is still waiting 10s after the release")
		}
	}
	var he *lease.HeldError
	if won == nil || !errors.As(refused, &he) || !he.Self || he.Fence != won.Fence() {
		t.Fatalf("after the release: lease %v and error %v; want one lease and a HeldError with Self and its fence", won, refused)
	}
	if errors.Is(refused, context.DeadlineExceeded) {
		t.Errorf("the refused sibling's error %v matches DeadlineExceeded", refused)
	}
}

func TestAcquireWakesOnReleaseNotTimer(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := f.c.TryAcquire(ctx, "job", lease.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other := f.other(t)
	got := make(chan *lease.Lease, 1)
	go func() {
		l2, err := other.Acquire(ctx, "job")
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	// The waiter must be asleep (a timer set for the hour) before we release.
	for f.clk.Timers() < 3 {
		time.Sleep(time.Millisecond)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l2 := <-got: // no fake time passed: woken by the release announcement
		if l2 == nil || l2.Fence() <= l.Fence() {
			t.Fatalf("second lease %v", l2)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the release")
	}
}

// TestQueueHeadLooksAtExpiry: the head of a key's queue looks again as soon
// as the holder's TTL runs out (a holder that died: no release to
// announce), 1 ms after the remaining TTL it was told, without the jitter
// that spreads waiters racing for a key (only the head can take it).
func TestQueueHeadLooksAtExpiry(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dead := driver.Request{Key: "job", Token: "dead-holder", Holder: "dead", TTL: 1500 * time.Millisecond}
	if _, err := f.mem.Acquire(ctx, dead); err != nil {
		t.Fatal(err)
	}
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := f.c.Acquire(ctx, "job", lease.WithTTL(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	// The waiter asleep on its timer (the holder's 1.5 s, under its renew
	// interval of 3.3 s).
	for f.clk.Timers() < 1 {
		time.Sleep(time.Millisecond)
	}
	f.clk.Advance(dead.TTL + time.Millisecond)
	select {
	case l := <-got:
		if l == nil {
			t.Fatal("no lease")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the head of the queue did not look again 1 ms after the holder's TTL ran out")
	}
}

func TestCloseReleasesAndStops(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var ls []*lease.Lease
	for _, k := range []string{"a", "b", "c"} {
		l, err := f.c.TryAcquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if !errors.Is(l.Err(), lease.ErrReleased) {
			t.Fatalf("%s: Err = %v", l.Key(), l.Err())
		}
		if info, _ := f.mem.Inspect(ctx, l.Key()); info.Held {
			t.Fatalf("%s still held after Close", l.Key())
		}
	}
	if _, err := f.c.TryAcquire(ctx, "a"); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("TryAcquire after Close = %v", err)
	}
	if _, err := f.c.Acquire(ctx, "a"); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Acquire after Close = %v", err)
	}
	if err := f.c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// countingClock counts the timers the heartbeat arms: one per wake-up.
type countingClock struct {
	*leasetest.FakeClock
	timers atomic.Int64
}

func (c *countingClock) NewTimer(d time.Duration) lease.Timer {
	c.timers.Add(1)
	return c.FakeClock.NewTimer(d)
}

// TestHeartbeatWakesRarelyWithoutBatching: with a store that renews one lease
// per call, renewals still converge into rounds, and the heartbeat wakes a few
// times per renew interval, not once per lease (each wake scans every lease).
func TestHeartbeatWakesRarelyWithoutBatching(t *testing.T) {
	clk := &countingClock{FakeClock: leasetest.NewFakeClock()}
	mem := memlease.New(memlease.WithClock(clk))
	defer mem.Close()
	c, err := lease.New(memlease.Plain(mem.Handle()), lease.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	ttl := 9 * time.Second
	interval := ttl / 3
	const n = 300
	var ls []*lease.Lease
	for i := range n { // acquired over 3 s of fake time
		l, err := c.TryAcquire(ctx, fmt.Sprintf("k%d", i), lease.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		clk.Advance(10 * time.Millisecond)
	}
	settle := func() {
		// Every lease renewed and the heartbeat asleep again.
		deadline := time.Now().Add(5 * time.Second)
		for clk.Timers() == 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(2 * time.Millisecond)
	}
	step := 50 * time.Millisecond
	advance := func(d time.Duration) {
		for end := clk.Now().Add(d); clk.Now().Before(end); {
			clk.Advance(step)
			settle()
		}
	}
	advance(5 * interval) // converge
	before := clk.timers.Load()
	advance(10 * interval)
	wakes := clk.timers.Load() - before
	for _, l := range ls {
		if l.Err() != nil {
			t.Fatalf("%s lost: %v", l.Key(), l.Err())
		}
	}
	if wakes > 10*4 {
		t.Fatalf("the heartbeat woke %d times in 10 renew intervals for %d leases: it should wake about once per interval", wakes, n)
	}
	t.Logf("%d heartbeat wake-ups in 10 renew intervals for %d leases", wakes, n)
}

// maxTTLStore is a memlease store that declares a maximum TTL.
type maxTTLStore struct {
	*memlease.Store
	max time.Duration
}

func (s maxTTLStore) Caps() driver.Caps {
	c := s.Store.Caps()
	c.MaxTTL = s.max
	return c
}

// TestDefaultTTLFitsStore: a Client given no TTL takes the store's maximum
// where it is below DefaultTTL; a TTL given above it is refused.
func TestDefaultTTLFitsStore(t *testing.T) {
	s := maxTTLStore{memlease.New(), 4 * time.Second}
	c, err := lease.New(s)
	if err != nil {
		t.Fatalf("New without a TTL on a store of max TTL 4s: %v", err)
	}
	defer c.Close()
	if c.TTL() != 4*time.Second {
		t.Errorf("TTL() = %v, want the store's maximum 4s", c.TTL())
	}
	l, err := c.Acquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.New(s, lease.WithTTL(5*time.Second)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New with a TTL of 5s over a max of 4s = %v, want ErrInvalid", err)
	}
}

// TestAcquireCancelledLeavesQueueOnce: an Acquire whose ctx had ended makes
// no store call at all, and one that gave up after a refusal leaves the FIFO
// queue with one release, so the key's next waiter is at the head.
func TestAcquireCancelledLeavesQueueOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	holder, err := f.other(t).TryAcquire(ctx, "job", lease.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := f.c.Acquire(cancelled, "job"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled ctx = %v, want context.Canceled", err)
	}
	if a, r := f.fault.Acquires(), f.fault.Releases(); a != 0 || r != 0 {
		t.Errorf("Acquire with a cancelled ctx made %d acquire and %d release calls, want none", a, r)
	}

	// A waiter that was refused once, then cancelled, leaves the queue.
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := f.c.Acquire(wctx, "job")
		done <- err
	}()
	for f.fault.Acquires() < 1 || f.clk.Timers() < 3 { // refused and asleep
		time.Sleep(time.Millisecond)
	}
	wcancel()
	if err := <-done; !errors.Is(err, context.Canceled) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire cancelled while waiting = %v, want ErrHeld and context.Canceled", err)
	}
	if r := f.fault.Releases(); r != 1 {
		t.Errorf("the cancelled waiter made %d release calls, want 1 (leaving the queue)", r)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := f.other(t)
	if _, err := next.TryAcquire(ctx, "job"); err != nil {
		t.Errorf("after the holder's release, with the waiter gone: TryAcquire = %v, want the lease", err)
	}
}
