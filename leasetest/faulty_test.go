package leasetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

func request(key, token string) driver.Request {
	return driver.Request{Key: key, Token: token, Holder: "h", TTL: time.Minute}
}

const tok = "0123456789abcdef0123456789abcdef"

func TestFaultyForwards(t *testing.T) {
	ctx := context.Background()
	inner := memlease.New(memlease.WithLimits(driver.Caps{MaxKeyLen: 64}))
	f := leasetest.Faulty(inner)
	if f.Inner() != inner {
		t.Errorf("Inner() is not the wrapped store")
	}
	g, err := f.Acquire(ctx, request("k", tok))
	if err != nil || g.Fence != 1 {
		t.Fatalf("Acquire = %+v, %v; want fence 1", g, err)
	}
	if err := f.Renew(ctx, request("k", tok)); err != nil {
		t.Errorf("Renew: %v", err)
	}
	if errs := f.RenewMany(ctx, []driver.Request{request("k", tok), request("x", tok)}); errs[0] != nil || !errors.Is(errs[1], lease.ErrNotHeld) {
		t.Errorf("RenewMany = %v, want [nil ErrNotHeld]", errs)
	}
	if info, err := f.Inspect(ctx, "k"); err != nil || !info.Held || info.Fence != 1 {
		t.Errorf("Inspect = %+v, %v", info, err)
	}
	if got := f.Caps(); got.MaxKeyLen != 64 {
		t.Errorf("Caps() = %+v, want the inner store's", got)
	}
	sub, err := f.Subscribe(ctx)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	if err := f.Release(ctx, request("k", tok)); err != nil {
		t.Errorf("Release: %v", err)
	}
	nctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if a, err := sub.Next(nctx); err != nil || a.Key != "k" {
		t.Errorf("Next = %+v, %v; want k", a, err)
	}
	if f.Acquires() != 1 || f.Renewals() != 3 {
		t.Errorf("Acquires() = %d, Renewals() = %d; want 1 and 3", f.Acquires(), f.Renewals())
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := inner.Inspect(ctx, "k"); !errors.Is(err, memlease.ErrClosed) {
		t.Errorf("Close did not close the inner store: %v", err)
	}
}

func TestFaultyOverAPlainStore(t *testing.T) {
	ctx := context.Background()
	f := leasetest.Faulty(memlease.Plain(memlease.New()))
	defer f.Close()
	if _, err := f.Subscribe(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Subscribe over a store without notifications: %v, want errors.ErrUnsupported", err)
	}
	if got := f.Caps(); got.FIFO {
		t.Errorf("Caps() = %+v, want no FIFO", got)
	}
	if _, err := f.Acquire(ctx, request("k", tok)); err != nil {
		t.Fatal(err)
	}
	errs := f.RenewMany(ctx, []driver.Request{request("k", tok), request("x", tok)})
	if errs[0] != nil || !errors.Is(errs[1], lease.ErrNotHeld) {
		t.Errorf("RenewMany one by one = %v, want [nil ErrNotHeld]", errs)
	}
}

func TestFaultyFailures(t *testing.T) {
	ctx := context.Background()
	inner := memlease.New()
	f := leasetest.Faulty(inner)
	defer f.Close()
	boom := errors.New("boom")
	f.FailAcquire(boom)
	if _, err := f.Acquire(ctx, request("k", tok)); !errors.Is(err, boom) {
		t.Errorf("Acquire with FailAcquire: %v, want boom", err)
	}
	if info, _ := inner.Inspect(ctx, "k"); info.Held {
		t.Errorf("a failed Acquire reached the inner store")
	}
	f.FailAcquire(nil)
	if _, err := f.Acquire(ctx, request("k", tok)); err != nil {
		t.Fatalf("Acquire after FailAcquire(nil): %v", err)
	}
	f.FailRenewals(boom)
	if err := f.Renew(ctx, request("k", tok)); !errors.Is(err, boom) {
		t.Errorf("Renew with FailRenewals: %v, want boom", err)
	}
	for _, err := range f.RenewMany(ctx, []driver.Request{request("k", tok), request("k", tok)}) {
		if !errors.Is(err, boom) {
			t.Errorf("RenewMany with FailRenewals: %v, want boom", err)
		}
	}
	f.FailRenewals(nil)
	if err := f.Renew(ctx, request("k", tok)); err != nil {
		t.Errorf("Renew after FailRenewals(nil): %v", err)
	}
	if f.Acquires() != 2 || f.Renewals() != 4 {
		t.Errorf("Acquires() = %d, Renewals() = %d; want 2 and 4 (failed calls count)", f.Acquires(), f.Renewals())
	}
}

func TestFaultyBlockRenewals(t *testing.T) {
	ctx := context.Background()
	f := leasetest.Faulty(memlease.New())
	defer f.Close()
	if _, err := f.Acquire(ctx, request("k", tok)); err != nil {
		t.Fatal(err)
	}
	f.BlockRenewals(true)
	f.BlockRenewals(true) // idempotent

	// A blocked call returns when its ctx ends.
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := f.Renew(tctx, request("k", tok)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("blocked Renew: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("blocked Renew returned after %v, before its ctx ended", d)
	}

	// Blocked calls proceed when unblocked.
	done := make(chan []error, 1)
	go func() { done <- f.RenewMany(ctx, []driver.Request{request("k", tok)}) }()
	select {
	case errs := <-done:
		t.Fatalf("RenewMany returned while blocked: %v", errs)
	case <-time.After(50 * time.Millisecond):
	}
	f.BlockRenewals(false)
	select {
	case errs := <-done:
		if errs[0] != nil {
			t.Errorf("RenewMany after unblocking: %v", errs[0])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RenewMany still blocked after BlockRenewals(false)")
	}

	// Close unblocks blocked calls with an error.
	f.BlockRenewals(true)
	errc := make(chan error, 1)
	go func() { errc <- f.Renew(ctx, request("k", tok)) }()
	time.Sleep(20 * time.Millisecond)
	if err := f.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Errorf("Renew unblocked by Close returned nil, want an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock a blocked Renew")
	}
}
