// Tests of coalesced acquisitions and releases (coalesce.go) over the
// in-memory store, with a store whose calls wait until the test lets them
// through.
package lease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/memlease"
)

// batchGate is a memlease.Store whose calls are recorded; each
// acquire call waits until the test lets it through (storeCall.proceed).
type batchGate struct {
	*memlease.Store

	mu    sync.Mutex
	calls []storeCall
	in    chan storeCall // every acquire call, as it starts
	open  chan struct{}  // closed: every acquire call goes through
	once  sync.Once
}

type storeCall struct {
	op      string // "acquire", "acquireMany", "release", "releaseMany"
	keys    []string
	ctx     context.Context
	proceed chan struct{} // closed by the test: the call goes on
}

func newBatchGate() *batchGate {
	return &batchGate{Store: memlease.New(), in: make(chan storeCall, 1024), open: make(chan struct{})}
}

// release lets every acquire call through from now on.
func (g *batchGate) release() { g.once.Do(func() { close(g.open) }) }

func (g *batchGate) enter(ctx context.Context, op string, rs ...driver.Request) {
	call := storeCall{op: op, ctx: ctx, proceed: make(chan struct{})}
	for _, r := range rs {
		call.keys = append(call.keys, r.Key)
	}
	g.mu.Lock()
	g.calls = append(g.calls, call)
	g.mu.Unlock()
	if op != "acquire" && op != "acquireMany" {
		return
	}
	g.in <- call
	select {
	case <-call.proceed:
	case <-g.open:
	case <-ctx.Done():
	}
}

func (g *batchGate) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	g.enter(ctx, "acquire", r)
	return g.Store.Acquire(ctx, r)
}

func (g *batchGate) AcquireMany(ctx context.Context, rs []driver.Request) ([]driver.Grant, []error) {
	g.enter(ctx, "acquireMany", rs...)
	return g.Store.AcquireMany(ctx, rs)
}

func (g *batchGate) Release(ctx context.Context, r driver.Request) error {
	g.enter(ctx, "release", r)
	return g.Store.Release(ctx, r)
}

func (g *batchGate) ReleaseMany(ctx context.Context, rs []driver.Request) []error {
	g.enter(ctx, "releaseMany", rs...)
	return g.Store.ReleaseMany(ctx, rs)
}

// next waits for the next acquire call to start.
func (g *batchGate) next(t *testing.T) storeCall {
	t.Helper()
	select {
	case c := <-g.in:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no store call within 5s")
		return storeCall{}
	}
}

// fill starts MaxInflight lone acquisitions of keys lone0, lone1, ... and
// returns their calls, held back, and their results.
func fill(t *testing.T, c *lease.Client, g *batchGate) ([]storeCall, []chan acqResult) {
	t.Helper()
	var calls []storeCall
	var chs []chan acqResult
	for i := range lease.MaxInflight {
		key := fmt.Sprintf("lone%d", i)
		chs = append(chs, goAcquire(c, context.Background(), key))
		call := g.next(t)
		if call.op != "acquire" || !slices.Equal(call.keys, []string{key}) {
			t.Fatalf("a lone caller's call: %s of %v, want acquire of [%s]", call.op, call.keys, key)
		}
		calls = append(calls, call)
	}
	return calls, chs
}

// waitPending waits until acquires acquisitions and releases releases of c
// are queued for the next batch.
func waitPending(t *testing.T, c *lease.Client, acquires, releases int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a, r := lease.Pending(c)
		if a == acquires && r == releases {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queued: %d acquisitions, %d releases; want %d, %d", a, r, acquires, releases)
		}
		time.Sleep(time.Millisecond)
	}
}

type acqResult struct {
	l   *lease.Lease
	err error
}

func goAcquire(c *lease.Client, ctx context.Context, key string) chan acqResult {
	ch := make(chan acqResult, 1)
	go func() {
		l, err := c.TryAcquire(ctx, key)
		ch <- acqResult{l, err}
	}()
	return ch
}

func getResult(t *testing.T, ch chan acqResult) acqResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no acqResult within 5s")
		return acqResult{}
	}
}

// TestCoalescedAcquire: lone callers are sent at once, alone, with Acquire,
// up to MaxInflight calls; the callers that arrive meanwhile ride one
// AcquireMany, with one request per key, each getting its own result.
func TestCoalescedAcquire(t *testing.T) {
	g := newBatchGate()
	c, err := lease.New(g, lease.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer g.release()
	other := g.Handle()
	if _, err := other.Acquire(context.Background(), driver.Request{Key: "taken", Token: "0123456789abcdef0123456789abcdef", Holder: "other", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}

	lone, lones := fill(t, c, g)
	keys := []string{"a", "b", "taken", "c", "d"}
	var chs []chan acqResult
	for _, k := range keys {
		chs = append(chs, goAcquire(c, context.Background(), k))
		waitPending(t, c, len(chs), 0) // in this order
	}
	dup := goAcquire(c, context.Background(), "a") // the same key: the batch after
	waitPending(t, c, len(keys)+1, 0)
	close(lone[0].proceed)
	if r := getResult(t, lones[0]); r.err != nil || r.l.Key() != "lone0" {
		t.Fatalf("lone TryAcquire: %v, %v", r.l, r.err)
	}
	call := g.next(t)
	if call.op != "acquireMany" || !slices.Equal(call.keys, keys) {
		t.Fatalf("the batch: %s of %v, want acquireMany of %v", call.op, call.keys, keys)
	}
	waitPending(t, c, 1, 0) // the second request for a waits for a free slot
	close(call.proceed)
	for i, ch := range chs {
		r := getResult(t, ch)
		if keys[i] == "taken" {
			var he *lease.HeldError
			if !errors.As(r.err, &he) || he.Holder != "other" || he.Self {
				t.Errorf("TryAcquire(taken) in the batch: %v, %v; want a *HeldError by other", r.l, r.err)
			}
			continue
		}
		if r.err != nil || r.l.Key() != keys[i] || r.l.Fence() != 1 {
			t.Errorf("TryAcquire(%q) in the batch: %v, %v", keys[i], r.l, r.err)
		}
	}
	if call := g.next(t); call.op != "acquire" || !slices.Equal(call.keys, []string{"a"}) {
		t.Fatalf("the second request for a: %s of %v, want acquire of [a] alone", call.op, call.keys)
	} else {
		close(call.proceed)
	}
	var he *lease.HeldError
	if r := getResult(t, dup); !errors.As(r.err, &he) || !he.Self {
		t.Errorf("the second TryAcquire(a): %v, %v; want a *HeldError with Self", r.l, r.err)
	}
	for i, call := range lone[1:] {
		close(call.proceed)
		if r := getResult(t, lones[i+1]); r.err != nil {
			t.Errorf("lone TryAcquire: %v", r.err)
		}
	}
}

// TestCoalescedCancel: a caller whose ctx ends while queued returns at
// once and is never sent; one whose ctx ends while its batch is in flight
// returns after the grace without ending the batch for the others, and
// what the store granted it is released.
func TestCoalescedCancel(t *testing.T) {
	g := newBatchGate()
	// Renew interval 100ms: the grace after a caller's ctx ends is 100ms.
	c, err := lease.New(g, lease.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer g.release()
	lone, lones := fill(t, c, g)

	qctx, qcancel := context.WithCancel(context.Background())
	queued := goAcquire(c, qctx, "queued")
	waitPending(t, c, 1, 0)
	qcancel()
	if r := getResult(t, queued); !errors.Is(r.err, context.Canceled) || r.l != nil {
		t.Errorf("TryAcquire cancelled while queued: %v, %v; want context.Canceled", r.l, r.err)
	}
	waitPending(t, c, 0, 0)

	bctx, bcancel := context.WithCancel(context.Background())
	gone := goAcquire(c, bctx, "gone")
	waitPending(t, c, 1, 0)
	stays := goAcquire(c, context.Background(), "stays")
	waitPending(t, c, 2, 0)
	close(lone[0].proceed) // a lone call returns; the batch is sent
	if r := getResult(t, lones[0]); r.err != nil {
		t.Fatalf("lone TryAcquire: %v", r.err)
	}
	call := g.next(t)
	if call.op != "acquireMany" || !slices.Equal(call.keys, []string{"gone", "stays"}) {
		t.Fatalf("the batch: %s of %v, want acquireMany of [gone stays]", call.op, call.keys)
	}
	bcancel()
	if r := getResult(t, gone); !errors.Is(r.err, context.Canceled) || r.l != nil {
		t.Errorf("TryAcquire cancelled in flight: %v, %v; want context.Canceled", r.l, r.err)
	}
	if err := call.ctx.Err(); err != nil {
		t.Errorf("the batch's ctx ended with one caller's: %v", err)
	}
	close(call.proceed)
	if r := getResult(t, stays); r.err != nil || r.l.Key() != "stays" {
		t.Errorf("TryAcquire(stays) beside a cancelled caller: %v, %v", r.l, r.err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := g.Inspect(context.Background(), "gone")
		if err != nil {
			t.Fatal(err)
		}
		if !info.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the grant of a caller that gave up is still held: %+v", info)
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.release()
	for _, ch := range lones[1:] {
		if r := getResult(t, ch); r.err != nil {
			t.Errorf("lone TryAcquire: %v", r.err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, call := range g.calls {
		if slices.Contains(call.keys, "queued") && call.op != "release" && call.op != "releaseMany" {
			t.Errorf("a caller that gave up while queued was sent: %+v", call)
		}
	}
}
