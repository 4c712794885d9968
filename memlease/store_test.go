package memlease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

const tokA, tokB = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

func req(key, token, holder string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Token: token, Holder: holder, TTL: ttl}
}

func mustAcquire(t *testing.T, s driver.Store, r driver.Request) uint64 {
	t.Helper()
	g, err := s.Acquire(context.Background(), r)
	if err != nil {
		t.Fatalf("Acquire(%+v): %v", r, err)
	}
	return g.Fence
}

func inspect(t *testing.T, s driver.Store, key string) driver.Info {
	t.Helper()
	info, err := s.Inspect(context.Background(), key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	return info
}

func TestExpiryFollowsTheClock(t *testing.T) {
	ctx := context.Background()
	clk := leasetest.NewFakeClock()
	s := memlease.New(memlease.WithClock(clk))
	if f := mustAcquire(t, s, req("k", tokA, "a", time.Second)); f != 1 {
		t.Fatalf("first fence = %d, want 1", f)
	}
	clk.Advance(999 * time.Millisecond)
	_, err := s.Acquire(ctx, req("k", tokB, "b", time.Second))
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("Acquire of a held key: %v, want a *lease.HeldError", err)
	}
	want := lease.HeldError{Key: "k", Holder: "a", Fence: 1, Remaining: time.Millisecond}
	if *he != want {
		t.Errorf("HeldError = %+v, want %+v", *he, want)
	}
	if info := inspect(t, s, "k"); info != (driver.Info{Key: "k", Held: true, Holder: "a", Fence: 1, Remaining: time.Millisecond}) {
		t.Errorf("Inspect before expiry = %+v", info)
	}

	clk.Advance(time.Millisecond) // exactly at the expiry: free
	if info := inspect(t, s, "k"); info != (driver.Info{Key: "k", Fence: 1}) {
		t.Errorf("Inspect at expiry = %+v, want free with the last fence 1", info)
	}
	if err := s.Renew(ctx, req("k", tokA, "a", time.Second)); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew after expiry: %v, want ErrNotHeld", err)
	}
	if f := mustAcquire(t, s, req("k", tokB, "b", time.Second)); f != 2 {
		t.Errorf("fence after expiry = %d, want 2", f)
	}
}

func TestRenewAndReacquireRefresh(t *testing.T) {
	ctx := context.Background()
	clk := leasetest.NewFakeClock()
	s := memlease.New(memlease.WithClock(clk))
	r := req("k", tokA, "a", time.Second)
	mustAcquire(t, s, r)
	clk.Advance(600 * time.Millisecond)
	if err := s.Renew(ctx, req("k", tokA, "a", 2*time.Second)); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if got := inspect(t, s, "k").Remaining; got != 2*time.Second {
		t.Errorf("Remaining after Renew = %v, want 2s", got)
	}
	clk.Advance(1900 * time.Millisecond)
	if f := mustAcquire(t, s, r); f != 1 {
		t.Errorf("re-acquire by the holder: fence %d, want the same 1", f)
	}
	if got := inspect(t, s, "k").Remaining; got != time.Second {
		t.Errorf("Remaining after re-acquire = %v, want 1s", got)
	}
	if err := s.Renew(ctx, req("k", tokB, "b", time.Second)); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew with a foreign token: %v, want ErrNotHeld", err)
	}
	if err := s.Release(ctx, req("k", tokB, "", 0)); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Release with a foreign token: %v, want ErrNotHeld", err)
	}
	if err := s.Release(ctx, req("k", tokA, "", 0)); err != nil {
		t.Errorf("Release: %v", err)
	}
	if err := s.Release(ctx, req("k", tokA, "", 0)); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("second Release: %v, want ErrNotHeld", err)
	}
}

func TestFencesAreNeverReused(t *testing.T) {
	ctx := context.Background()
	s := memlease.New()
	other := s.Handle()
	for want := uint64(1); want <= 5; want++ {
		tok := tokA
		if want%2 == 0 {
			tok = tokB
		}
		var st driver.Store = s
		if want%2 == 0 {
			st = other
		}
		if f := mustAcquire(t, st, req("k", tok, "", time.Minute)); f != want {
			t.Fatalf("fence = %d, want %d", f, want)
		}
		if err := st.Release(ctx, req("k", tok, "", 0)); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	if f := mustAcquire(t, s, req("other", tokA, "", time.Minute)); f != 1 {
		t.Errorf("another key's first fence = %d, want 1 (fences are per key)", f)
	}
	if info := inspect(t, other, "k"); info.Held || info.Fence != 5 {
		t.Errorf("Inspect of a released key = %+v, want free with last fence 5", info)
	}
}

func TestRenewMany(t *testing.T) {
	ctx := context.Background()
	clk := leasetest.NewFakeClock()
	s := memlease.New(memlease.WithClock(clk))
	mustAcquire(t, s, req("a", tokA, "", time.Second))
	mustAcquire(t, s, req("b", tokB, "", time.Second))
	clk.Advance(500 * time.Millisecond)
	errs := s.RenewMany(ctx, []driver.Request{
		req("a", tokA, "", time.Second),
		req("b", tokA, "", time.Second), // b is tokB's
		req("c", tokA, "", time.Second), // never held
		req("", tokA, "", time.Second),  // invalid
	})
	if len(errs) != 4 || errs[0] != nil || !errors.Is(errs[1], lease.ErrNotHeld) ||
		!errors.Is(errs[2], lease.ErrNotHeld) || !errors.Is(errs[3], lease.ErrInvalid) {
		t.Fatalf("RenewMany = %v, want [nil ErrNotHeld ErrNotHeld ErrInvalid]", errs)
	}
	if got := inspect(t, s, "a").Remaining; got != time.Second {
		t.Errorf("a's Remaining after RenewMany = %v, want 1s", got)
	}
	if got := inspect(t, s, "b").Remaining; got != 500*time.Millisecond {
		t.Errorf("b's Remaining = %v, want 500ms (not renewed by a foreign token)", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for i, err := range s.RenewMany(cancelled, []driver.Request{req("a", tokA, "", time.Second), req("b", tokB, "", time.Second)}) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("RenewMany with a cancelled ctx: errs[%d] = %v, want context.Canceled", i, err)
		}
	}
}

func TestInvalidInputAndLimits(t *testing.T) {
	ctx := context.Background()
	lim := driver.Caps{MinTTL: 100 * time.Millisecond, MaxTTL: time.Minute, MaxKeyLen: 8}
	s := memlease.New(memlease.WithLimits(lim))
	if got := s.Caps(); got.MinTTL != lim.MinTTL || got.MaxTTL != lim.MaxTTL || got.MaxKeyLen != lim.MaxKeyLen || !got.FIFO {
		t.Errorf("Caps() = %+v, want %+v with FIFO", got, lim)
	}
	for _, r := range []driver.Request{
		req("", tokA, "", time.Second),
		req("123456789", tokA, "", time.Second),
		req("k", "", "", time.Second),
		req("k", tokA, "", 0),
		req("k", tokA, "", -time.Second),
		req("k", tokA, "", 99*time.Millisecond),
		req("k", tokA, "", time.Minute+1),
	} {
		if _, err := s.Acquire(ctx, r); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Acquire(%+v): %v, want ErrInvalid", r, err)
		}
		if err := s.Renew(ctx, r); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Renew(%+v): %v, want ErrInvalid", r, err)
		}
	}
	if err := s.Release(ctx, req("", tokA, "", 0)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Release with an empty key: %v, want ErrInvalid", err)
	}
	if _, err := s.Inspect(ctx, "123456789"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Inspect of a long key: %v, want ErrInvalid", err)
	}
	if got := memlease.New().Caps(); got.MinTTL != 0 || got.MaxTTL != 0 || got.MaxKeyLen != 0 {
		t.Errorf("default Caps() = %+v, want no limits", got)
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := memlease.New()
	if _, err := s.Acquire(ctx, req("k", tokA, "", time.Second)); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire: %v, want context.Canceled", err)
	}
	if info := inspect(t, s, "k"); info.Held {
		t.Errorf("a cancelled Acquire took the key: %+v", info)
	}
	if err := s.Renew(ctx, req("k", tokA, "", time.Second)); !errors.Is(err, context.Canceled) {
		t.Errorf("Renew: %v, want context.Canceled", err)
	}
	if err := s.Release(ctx, req("k", tokA, "", 0)); !errors.Is(err, context.Canceled) {
		t.Errorf("Release: %v, want context.Canceled", err)
	}
	if _, err := s.Inspect(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Inspect: %v, want context.Canceled", err)
	}
	if _, err := s.Subscribe(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Subscribe: %v, want context.Canceled", err)
	}
}

func TestClosedHandle(t *testing.T) {
	ctx := context.Background()
	s := memlease.New()
	other := s.Handle()
	mustAcquire(t, s, req("k", tokA, "a", time.Minute))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Acquire(ctx, req("j", tokA, "", time.Second)); !errors.Is(err, memlease.ErrClosed) {
		t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
	if err := s.Renew(ctx, req("k", tokA, "", time.Second)); !errors.Is(err, memlease.ErrClosed) {
		t.Errorf("Renew after Close: %v, want ErrClosed", err)
	}
	if err := s.Release(ctx, req("k", tokA, "", 0)); !errors.Is(err, memlease.ErrClosed) {
		t.Errorf("Release after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Inspect(ctx, "k"); !errors.Is(err, memlease.ErrClosed) {
		t.Errorf("Inspect after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Subscribe(ctx); !errors.Is(err, memlease.ErrClosed) {
		t.Errorf("Subscribe after Close: %v, want ErrClosed", err)
	}
	for _, err := range s.RenewMany(ctx, []driver.Request{req("k", tokA, "", time.Second)}) {
		if !errors.Is(err, memlease.ErrClosed) {
			t.Errorf("RenewMany after Close: %v, want ErrClosed", err)
		}
	}
	// The keys outlive the handle: other handles still see and use them.
	if info := inspect(t, other, "k"); !info.Held || info.Holder != "a" {
		t.Errorf("Inspect through another handle = %+v, want held by a", info)
	}
	if err := other.Release(ctx, req("k", tokA, "", 0)); err != nil {
		t.Errorf("Release through another handle: %v", err)
	}
	if f := mustAcquire(t, s.Handle(), req("k", tokB, "", time.Second)); f != 2 {
		t.Errorf("fence through a handle of a closed handle = %d, want 2", f)
	}
}

func TestPlainHidesOptionalInterfaces(t *testing.T) {
	s := memlease.New()
	p := memlease.Plain(s)
	if _, ok := p.(driver.BatchRenewer); ok {
		t.Error("Plain store is a BatchRenewer")
	}
	if _, ok := p.(driver.Notifier); ok {
		t.Error("Plain store is a Notifier")
	}
	if p.Caps().FIFO {
		t.Error("Plain store declares FIFO")
	}
	mustAcquire(t, p, req("k", tokA, "a", time.Minute))
	if info := inspect(t, s, "k"); !info.Held || info.Holder != "a" {
		t.Errorf("Inspect through the wrapped store = %+v, want held by a", info)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Inspect(context.Background(), "k"); !errors.Is(err, memlease.ErrClosed) {
		t.Errorf("closing the Plain store did not close the wrapped one: %v", err)
	}
}

// TestRace runs many goroutines against one key through many handles.
func TestRace(t *testing.T) {
	ctx := context.Background()
	s := memlease.New()
	const n = 64
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []string
	)
	start := make(chan struct{})
	for i := range n {
		h := s.Handle()
		tok := fmt.Sprintf("%032x", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := h.Acquire(ctx, req("k", tok, "", time.Minute))
			switch {
			case err == nil:
				mu.Lock()
				wins = append(wins, tok)
				mu.Unlock()
			case !errors.Is(err, lease.ErrHeld):
				t.Errorf("Acquire: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d winners, want 1", len(wins))
	}
}
