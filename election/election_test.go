// Unit tests of package election on the in-memory store: input checks,
// Resign, Run's loop and its exits, Observe's channel lifetime. The
// conformance section (leasetest.Run) tests elections on every store.

package election_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/election"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// memClient returns a client over a new handle of root, closed at cleanup.
func memClient(t *testing.T, root *memlease.Store, opts ...lease.Option) *lease.Client {
	t.Helper()
	h := root.Handle()
	c, err := lease.New(h, append([]lease.Option{lease.WithTTL(300 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = h.Close()
	})
	return c
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestNewRejectsBadInput(t *testing.T) {
	root := memlease.New()
	defer root.Close()
	c := memClient(t, root)
	for name, f := range map[string]func() (*election.Election, error){
		"nil client": func() (*election.Election, error) { return election.New(nil, "k") },
		"empty key":  func() (*election.Election, error) { return election.New(c, "") },
		"nil option": func() (*election.Election, error) { return election.New(c, "k", nil) },
		"short TTL":  func() (*election.Election, error) { return election.New(c, "k", election.WithTTL(time.Millisecond)) },
	} {
		if _, err := f(); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("New with a %s: %v, want ErrInvalid", name, err)
		}
	}
	e, err := election.New(c, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background(), nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Run(nil): %v, want ErrInvalid", err)
	}
	if election.LeaseFrom(context.Background()) != nil {
		t.Errorf("LeaseFrom of a plain context is not nil")
	}
}

func TestIdentity(t *testing.T) {
	root := memlease.New()
	defer root.Close()
	c := memClient(t, root, lease.WithHolder("svc-1"))
	ctx := ctxFor(t, 10*time.Second)
	byClient, err := election.New(c, "who")
	if err != nil {
		t.Fatal(err)
	}
	if byClient.Identity() != "svc-1" {
		t.Errorf("Identity() = %q, want the Client's holder %q", byClient.Identity(), "svc-1")
	}
	l, err := byClient.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ld, err := byClient.Leader(ctx); err != nil || ld.Identity != "svc-1" || ld.Fence != l.Fence() {
		t.Errorf("Leader() = %+v, %v; want svc-1 with fence %d", ld, err, l.Fence())
	}
	if err := byClient.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	named, err := election.New(c, "who", election.WithIdentity("primary"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := named.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if ld, err := named.Leader(ctx); err != nil || ld.Identity != "primary" {
		t.Errorf("Leader() = %+v, %v; want identity primary", ld, err)
	}
}

// TestResignAfterLoss: Resign of a lost leadership reports ErrNotLeader,
// with the loss as the cause.
func TestResignAfterLoss(t *testing.T) {
	root := memlease.New()
	defer root.Close()
	fs := leasetest.Faulty(root.Handle())
	defer fs.Close()
	c, err := lease.New(fs, lease.WithTTL(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxFor(t, 10*time.Second)
	e, err := election.New(c, "lost")
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fs.BlockRenewals(true)
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("leadership not lost within 5s of renewals stalling")
	}
	if e.Lease() != nil {
		t.Errorf("Lease() after the loss is not nil")
	}
	err = e.Resign(ctx)
	if !errors.Is(err, election.ErrNotLeader) || !errors.Is(err, lease.ErrLost) {
		t.Errorf("Resign after the loss: %v, want ErrNotLeader and ErrLost", err)
	}
	fs.BlockRenewals(false)
}

// TestRunEndsWhenClientCloses: Run waiting in Campaign returns ErrClosed
// promptly when the Client closes; Observe's channel closes too.
func TestRunEndsWhenClientCloses(t *testing.T) {
	root := memlease.New()
	defer root.Close()
	leader := memClient(t, root, lease.WithTTL(10*time.Second))
	follower := memClient(t, root, lease.WithTTL(10*time.Second))
	ctx := ctxFor(t, 20*time.Second)
	el, err := election.New(leader, "closing")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := el.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	ef, err := election.New(follower, "closing")
	if err != nil {
		t.Fatal(err)
	}
	obs := ef.Observe(ctx)
	if l := <-obs; !l.Held {
		t.Errorf("Observe's first delivery %+v, want the leader", l)
	}
	done := make(chan error, 1)
	go func() {
		done <- ef.Run(ctx, func(context.Context) { t.Error("the follower led") })
	}()
	time.Sleep(50 * time.Millisecond)
	if err := follower.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, lease.ErrClosed) {
			t.Errorf("Run when the Client closed: %v, want ErrClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return within 3s of Close (TTL 10s)")
	}
	select {
	case _, ok := <-obs:
		for ok {
			_, ok = <-obs
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Observe's channel was not closed within 5s of Close")
	}
}

// TestRunReleasesAfterFunction: leadership is held until fn returns, then
// released, and Run campaigns again.
func TestRunReleasesAfterFunction(t *testing.T) {
	root := memlease.New()
	defer root.Close()
	c := memClient(t, root)
	other := memClient(t, root)
	ctx, cancel := context.WithCancel(ctxFor(t, 20*time.Second))
	defer cancel()
	e, err := election.New(c, "terms")
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := election.New(other, "terms")
	if err != nil {
		t.Fatal(err)
	}
	var fences []uint64
	err = e.Run(ctx, func(leaderCtx context.Context) {
		l := election.LeaseFrom(leaderCtx)
		fences = append(fences, l.Fence())
		time.Sleep(150 * time.Millisecond) // longer than a renew interval
		if ld, err := watcher.Leader(ctx); err != nil || !ld.Held || ld.Fence != l.Fence() {
			t.Errorf("while fn runs: Leader = %+v, %v; want fence %d", ld, err, l.Fence())
		}
		if len(fences) == 3 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
	if len(fences) != 3 || fences[0] >= fences[1] || fences[1] >= fences[2] {
		t.Errorf("terms' fences %v, want 3 increasing", fences)
	}
	if ld, err := watcher.Leader(context.Background()); err != nil || ld.Held {
		t.Errorf("after Run: Leader = %+v, %v; want vacant", ld, err)
	}
}

type ctxKey struct{}

// TestLeaderContext: leaderCtx carries Run's ctx values and deadline, ends
// in the same call that ends the lease (a successor can only follow it), and
// ends with Run's ctx.
func TestLeaderContext(t *testing.T) {
	root := memlease.New()
	defer root.Close()
	c := memClient(t, root)
	base, cancelBase := context.WithTimeout(ctxFor(t, 20*time.Second), 10*time.Second)
	defer cancelBase()
	ctx, cancel := context.WithCancel(context.WithValue(base, ctxKey{}, "v"))
	defer cancel()
	e, err := election.New(c, "leaderctx")
	if err != nil {
		t.Fatal(err)
	}
	terms := 0
	err = e.Run(ctx, func(leaderCtx context.Context) {
		terms++
		if v := leaderCtx.Value(ctxKey{}); v != "v" {
			t.Errorf("leaderCtx.Value = %v, want Run's ctx value", v)
		}
		want, _ := ctx.Deadline()
		if d, ok := leaderCtx.Deadline(); !ok || !d.Equal(want) {
			t.Errorf("leaderCtx.Deadline = %v, %v; want Run's ctx deadline %v", d, ok, want)
		}
		child, cancelChild := context.WithCancel(leaderCtx)
		defer cancelChild()
		if terms == 2 {
			cancel()
			select {
			case <-leaderCtx.Done():
			case <-time.After(5 * time.Second):
				t.Errorf("leaderCtx not cancelled with Run's ctx")
			}
			return
		}
		l := election.LeaseFrom(leaderCtx)
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		// No wait: the lease's end cancels leaderCtx and its children
		// synchronously.
		if !errors.Is(context.Cause(leaderCtx), lease.ErrReleased) || child.Err() == nil {
			t.Errorf("right after Release: Cause(leaderCtx) = %v, child.Err() = %v; want ErrReleased and cancelled",
				context.Cause(leaderCtx), child.Err())
		}
	})
	if !errors.Is(err, context.Canceled) || terms != 2 {
		t.Errorf("Run: %v after %d terms, want context.Canceled after 2", err, terms)
	}
}

// TestCandidatesOfOneClientAreOneHolder: a second candidate of the same
// election on the same Client is refused at once while the first leads,
// instead of waiting for its own Client's lease.
func TestCandidatesOfOneClientAreOneHolder(t *testing.T) {
	root := memlease.New()
	defer root.Close()
	c := memClient(t, root)
	ctx := ctxFor(t, 10*time.Second)
	first, err := election.New(c, "one")
	if err != nil {
		t.Fatal(err)
	}
	second, err := election.New(c, "one")
	if err != nil {
		t.Fatal(err)
	}
	l, err := first.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = second.Campaign(ctx)
	var he *lease.HeldError
	if !errors.As(err, &he) || !he.Self || he.Fence != l.Fence() || ctx.Err() != nil {
		t.Fatalf("second candidate's Campaign = %v, want at once a HeldError with Self and fence %d", err, l.Fence())
	}
	if err := second.Run(ctx, func(context.Context) {}); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("second candidate's Run = %v, want ErrHeld", err)
	}
}

// TestCandidatesOfAReentrantClient: two candidates on one Client whose
// default is WithReentrant(true) are still two: the second waits.
func TestCandidatesOfAReentrantClient(t *testing.T) {
	c, err := lease.New(memlease.New(), lease.WithReentrant(true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a, err := election.New(c, "leader")
	if err != nil {
		t.Fatal(err)
	}
	b, err := election.New(c, "leader")
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(ctx)
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if lb, err := b.Campaign(wctx); err == nil {
		t.Fatalf("the second candidate won too (same lease: %v)", lb == la)
	}
}
