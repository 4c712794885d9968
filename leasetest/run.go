// The conformance suite's entry point (Run, Harness) and its per-subtest
// environment: namespaces, stores, clients, deadlines and the leak check.

package leasetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Harness tells Run how to reach the store under test.
type Harness struct {
	// NewStore returns a new store over namespace ns; stores returned for the
	// same ns share keys, like separate processes; ns is fresh for every
	// subtest. The suite closes the stores it gets. Goroutines a store starts
	// must end when it is closed (the suite checks for leaks); shared
	// resources must be set up before Run.
	NewStore func(t testing.TB, ns string) driver.Store
	// TTL is the short TTL used by timing tests (default 500ms); stores with
	// coarse expiry set more.
	TTL time.Duration
}

// DefaultTTL is the Harness TTL used when Harness.TTL is zero.
const DefaultTTL = 500 * time.Millisecond

// Run runs the conformance suite against the store h makes: store-level
// contract tests (errors, fences, expiry, renewal), lease.Client tests
// over the store (heartbeat, loss, waiting, cancellation, Close), and leader
// election (package election), semaphore and FIFO hand-off tests over the
// Client. Subtests run
// one after the other, each in a fresh namespace with its own stores and
// clients, bounded in time, and fail if they leave goroutines behind.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewStore == nil {
		t.Fatal("leasetest.Run: Harness.NewStore is nil")
	}
	if h.TTL == 0 {
		h.TTL = DefaultTTL
	}
	if h.TTL < 4*lease.MinTTL {
		t.Fatalf("leasetest.Run: Harness.TTL %v is too short; use at least %v", h.TTL, 4*lease.MinTTL)
	}
	for _, tc := range slices.Concat(cases, fifoCases, sharedCases, listCases, batchCases) {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(newEnv(t, h))
		})
	}
}

// cases lists the subtests in the order they run.
var cases = []struct {
	name string
	fn   func(e *env)
}{
	{"AcquireHeld", testAcquireHeld},
	{"Race", testRace},
	{"StoreRenewExtends", testStoreRenewExtends},
	{"StoreRenewAfterExpiry", testStoreRenewAfterExpiry},
	{"StoreRenewAfterTakeover", testStoreRenewAfterTakeover},
	{"ForeignRelease", testForeignRelease},
	{"ExpiryFrees", testExpiryFrees},
	{"FencesIncrease", testFencesIncrease},
	{"IdempotentAcquire", testIdempotentAcquire},
	{"HeartbeatKeeps", testHeartbeatKeeps},
	{"LossNotHeld", testLossNotHeld},
	{"LossBeforeTakeover", testLossBeforeTakeover},
	{"WaitAcquire", testWaitAcquire},
	{"WaitExpiry", testWaitExpiry},
	{"CtxCancel", testCtxCancel},
	{"CancelStorm", testCancelStorm},
	{"Do", testDo},
	{"DoPanic", testDoPanic},
	{"AcquireOwnKey", testAcquireOwnKey},
	{"AcquireGiveUp", testAcquireGiveUp},
	{"CloseReleases", testCloseReleases},
	{"InvalidInput", testInvalidInput},
	{"ExtendManual", testExtendManual},
	{"MaxHold", testMaxHold},
	{"Reentrant", testReentrant},
	{"AcquireAll", testAcquireAll},
	{"AcquireAllContended", testAcquireAllContended},
	{"BatchRenew", testBatchRenew},
	{"Inspect", testInspect},
	{"ElectionBasics", testElectionBasics},
	{"ElectionFailover", testElectionFailover},
	{"ElectionRunPanic", testElectionRunPanic},
	{"SemaphoreLimit", testSemaphoreLimit},
	{"SemaphoreWake", testSemaphoreWake},
}

// env is one subtest's environment.
type env struct {
	t   *testing.T
	h   Harness
	ttl time.Duration
	ns  string
	ctx context.Context // bounded: every subtest ends in time
}

// leakWait bounds how long the leak check waits for goroutines to exit.
const leakWait = 5 * time.Second

// closeWait bounds how long closing a client may take.
const closeWait = 10 * time.Second

func newEnv(t *testing.T, h Harness) *env {
	// Registered first, so it runs last: after clients and stores are closed.
	snapshot := goleak.IgnoreCurrent()
	t.Cleanup(func() { checkLeaks(t, snapshot) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second+20*h.TTL)
	t.Cleanup(cancel)
	return &env{t: t, h: h, ttl: h.TTL, ns: namespace(t), ctx: ctx}
}

// checkLeaks fails t if goroutines started since snapshot are still running
// after leakWait.
func checkLeaks(t *testing.T, snapshot goleak.Option) {
	deadline := time.Now().Add(leakWait)
	for {
		err := goleak.Find(snapshot)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines left running after the subtest: %v", err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// namespace returns a fresh namespace named after the test.
func namespace(t *testing.T) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, t.Name())
	return "lt_" + name + "_" + randHex(4)
}

// randHex returns 2n random hex characters.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// token returns a new lease token, as a Client makes them.
func token() string { return randHex(16) }

// key returns a fresh key.
func (e *env) key(name string) string { return name + "-" + randHex(4) }

// store returns a new store over the subtest's namespace, closed at cleanup
// after the clients made on it.
// longTTL is a TTL that renewals late by seconds on a busy machine do not
// let lapse: 20 TTLs, or the store's maximum if that is shorter.
func (e *env) longTTL(s driver.Store) time.Duration {
	d := 20 * e.ttl
	if m := s.Caps().MaxTTL; m > 0 {
		d = min(d, m)
	}
	return d
}

// heartbeatTTL is a TTL for tests of the heartbeat keeping leases: at least
// 2s, whose renewals may run a second late without losing (the subtest's
// TTL if longer, the store's maximum if shorter).
func (e *env) heartbeatTTL(s driver.Store) time.Duration {
	d := max(e.ttl, 2*time.Second)
	if m := s.Caps().MaxTTL; m > 0 {
		d = min(d, m)
	}
	return d
}

func (e *env) store() driver.Store {
	e.t.Helper()
	s := e.h.NewStore(e.t, e.ns)
	if s == nil {
		e.t.Fatal("Harness.NewStore returned nil")
	}
	e.t.Cleanup(func() {
		if err := s.Close(); err != nil {
			e.t.Errorf("closing the store: %v", err)
		}
	})
	return s
}

// faulty returns a FaultyStore over a new store of the subtest's namespace,
// closed at cleanup after the clients made on it (closing it closes the store
// and unblocks stuck renewals).
func (e *env) faulty() *FaultyStore {
	e.t.Helper()
	s := e.h.NewStore(e.t, e.ns)
	if s == nil {
		e.t.Fatal("Harness.NewStore returned nil")
	}
	fs := Faulty(s)
	e.t.Cleanup(func() {
		if err := fs.Close(); err != nil {
			e.t.Errorf("closing the store: %v", err)
		}
	})
	return fs
}

// client returns a lease.Client over s with the subtest's TTL, closed at
// cleanup before s. Options override the defaults.
func (e *env) client(s driver.Store, opts ...lease.Option) *lease.Client {
	e.t.Helper()
	opts = append([]lease.Option{lease.WithTTL(e.ttl), lease.WithHolder("leasetest-" + randHex(4))}, opts...)
	c, err := lease.New(s, opts...)
	if err != nil {
		e.t.Fatalf("lease.New: %v", err)
	}
	e.t.Cleanup(func() {
		done := make(chan error, 1)
		go func() { done <- c.Close() }()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("closing the client: %v", err)
			}
		case <-time.After(closeWait):
			e.t.Errorf("Client.Close did not return within %v", closeWait)
		}
	})
	return c
}

// sleep waits for d or until the subtest's deadline.
func (e *env) sleep(d time.Duration) {
	e.t.Helper()
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-e.ctx.Done():
		e.t.Fatalf("subtest deadline reached while sleeping: %v", e.ctx.Err())
	}
}

// expiryWait is how long to wait for a lease with the subtest's TTL that is
// not renewed to have expired in the store: TTL plus a generous margin.
func (e *env) expiryWait() time.Duration { return e.ttl + e.ttl/2 + 50*time.Millisecond }

// storeAcquire acquires key for a new token at the store level and fails the
// test on error.
func (e *env) storeAcquire(s driver.Store, key, holder string, ttl time.Duration) (driver.Request, driver.Grant) {
	e.t.Helper()
	r := driver.Request{Key: key, Token: token(), Holder: holder, TTL: ttl}
	g, err := e.acquireRetried(s, r)
	if err != nil {
		e.t.Fatalf("store Acquire(%q): %v", key, err)
	}
	if g.Fence == 0 {
		e.t.Fatalf("store Acquire(%q): fence 0, want > 0", key)
	}
	return r, g
}

// acquireRetried is s.Acquire(r), sent again (up to 3 times in all) after
// a transient error: a connection that a loaded machine or a server's
// election dropped under the call (ZooKeeper's "connection closed"). The
// Client retries those; a store's answer to a retried token is the same
// grant or refusal (IdempotentAcquire), so the subtests that call the store
// directly retry too. Every refusal and typed error is returned at once.
func (e *env) acquireRetried(s driver.Store, r driver.Request) (driver.Grant, error) {
	e.t.Helper()
	for try := 1; ; try++ {
		g, err := s.Acquire(e.ctx, r)
		if err == nil || try == 3 || e.ctx.Err() != nil || !transient(err) {
			return g, err
		}
		e.t.Logf("store Acquire(%q) for %s, try %d: %v; trying again", r.Key, r.Holder, try, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// transient reports whether err is none of the errors a store returns on
// purpose (a refusal, bad input, a corrupt record, a lost or broken hold).
func transient(err error) bool {
	for _, typed := range []error{lease.ErrHeld, lease.ErrNotHeld, lease.ErrInvalid, lease.ErrCorrupt, lease.ErrQueueFull,
		lease.ErrBroken, lease.ErrClosed, lease.ErrLost, errors.ErrUnsupported, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, typed) {
			return false
		}
	}
	return true
}

// inspect returns the store's Info for key and fails the test on error.
func (e *env) inspect(s driver.Store, key string) driver.Info {
	e.t.Helper()
	info, err := s.Inspect(e.ctx, key)
	if err != nil {
		e.t.Fatalf("Inspect(%q): %v", key, err)
	}
	if info.Key != "" && info.Key != key {
		e.t.Errorf("Inspect(%q).Key = %q", key, info.Key)
	}
	return info
}

// tryAcquire acquires key through c and fails the test on error.
func (e *env) tryAcquire(c *lease.Client, key string, opts ...lease.AcquireOption) *lease.Lease {
	e.t.Helper()
	l, err := c.TryAcquire(e.ctx, key, opts...)
	if err != nil {
		e.t.Fatalf("TryAcquire(%q): %v", key, err)
	}
	if l == nil {
		e.t.Fatalf("TryAcquire(%q) returned a nil lease and no error", key)
	}
	return l
}

// wantHeld checks that err reports key as held, by holder with fence: every
// store names them.
func (e *env) wantHeld(err error, key, holder string, fence uint64) {
	e.t.Helper()
	if !errors.Is(err, lease.ErrHeld) {
		e.t.Fatalf("error = %v, want one matching lease.ErrHeld", err)
	}
	var he *lease.HeldError
	if !errors.As(err, &he) {
		e.t.Fatalf("error %v matches ErrHeld but is not a *lease.HeldError", err)
	}
	if he.Key != key {
		e.t.Errorf("HeldError.Key = %q, want %q", he.Key, key)
	}
	if he.Holder != holder {
		e.t.Errorf("HeldError.Holder = %q, want %q", he.Holder, holder)
	}
	if he.Fence != fence {
		e.t.Errorf("HeldError.Fence = %d, want %d", he.Fence, fence)
	}
}

// wantNotHeld checks that err matches lease.ErrNotHeld.
func (e *env) wantNotHeld(err error, what string) {
	e.t.Helper()
	if !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("%s: error = %v, want one matching lease.ErrNotHeld", what, err)
	}
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitClosed waits up to d for ch to close and reports whether it did.
func (e *env) waitClosed(ch <-chan struct{}, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ch:
		return true
	case <-tm.C:
		return false
	case <-e.ctx.Done():
		return false
	}
}
