package lease

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/leasekit/lease/driver"
)

// Coalesced operations: when many goroutines of one Client acquire (or
// release) at the same moment and the store implements driver.BatchAcquirer
// (driver.BatchReleaser), their requests reach the store together, in one
// call. There is no linger: a caller that finds fewer than maxInflight calls
// of its kind in flight sends its own request at once, alone, as before;
// callers that arrive while maxInflight calls are in flight queue and ride
// the next call, sent as soon as one returns. See docs/design.md.

// maxBatch bounds the requests of one batched call (a store's
// Caps.MaxBatch may lower it).
const maxBatch = 512

// maxInflight bounds the concurrent store calls of one kind of a Client
// with a batching store: more than one, so that one slow call (a stalled
// connection, a far Cluster node) does not hold back every other caller;
// no more than two, since every free slot sends a lone request, and under
// load lone requests are round trips that carry one request each.
const maxInflight = 2

// batcher coalesces the store calls of one kind (acquire or release); T is
// a call's result.
type batcher[T any] struct {
	c   *Client
	max int // the most requests of one batch
	// one sends a lone request; many sends a batch (never two requests for
	// one key), returning one result and one error per request, in order.
	one  func(context.Context, driver.Request) (T, error)
	many func(context.Context, []driver.Request) ([]T, []error)
	// undo, if set, frees what the store may hold for the request of a
	// caller that gave up before its batch returned.
	undo func(driver.Request, T, error)

	mu        sync.Mutex
	busy      int        // the calls in flight
	gathering bool       // a caller yields before its call: arrivals ride it
	pending   []*call[T] // the callers waiting for the next batch, in order
}

// call is one caller's request on its way through a batcher.
type call[T any] struct {
	ctx   context.Context
	req   driver.Request
	grace time.Duration // how long the store call may outlive ctx
	done  chan struct{} // closed once res and err are set

	// Guarded by the batcher's mu.
	res   T
	err   error
	batch *batch // the batch that carries it, once sent
	gone  bool   // the caller gave up before the result
}

// batch is one batched store call in flight.
type batch struct {
	cancel context.CancelFunc // ends the store call; nil until it is sent
	left   int                // its callers still waiting for the result
}

// do sends req for a caller whose context is ctx and returns the store's
// result. The store call may outlive ctx by grace (see graceCtx); a batch
// goes on for the other callers when ctx ends.
func (b *batcher[T]) do(ctx context.Context, req driver.Request, grace time.Duration) (T, error) {
	var zero T
	b.mu.Lock()
	if b.busy < maxInflight && !b.gathering { // a free slot: send at once
		b.busy++
		// One yield first: callers already runnable (those a batch just
		// answered) arrive meanwhile and ride along. Nothing waits on a
		// timer: alone, the caller goes on at once.
		b.gathering = true
		b.mu.Unlock()
		runtime.Gosched()
		b.mu.Lock()
		b.gathering = false
		if len(b.pending) > 0 {
			return b.gathered(ctx, req, grace)
		}
		b.mu.Unlock()
		sctx, stop := ctx, func() {}
		if grace > 0 {
			sctx, stop = graceCtx(ctx, grace)
		}
		res, err := b.one(sctx, req)
		stop()
		b.done()
		return res, err
	}
	cl := &call[T]{ctx: ctx, req: req, grace: grace, done: make(chan struct{})}
	b.pending = append(b.pending, cl)
	b.mu.Unlock()

	select {
	case <-cl.done:
		return cl.res, cl.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	if i := slices.Index(b.pending, cl); i >= 0 { // not sent: nothing written
		b.pending = slices.Delete(b.pending, i, i+1)
		b.mu.Unlock()
		return zero, ctx.Err()
	}
	b.mu.Unlock()
	if grace > 0 { // sent: the result usually follows soon (the real clock, as graceCtx)
		t := time.NewTimer(grace)
		select {
		case <-cl.done:
			t.Stop()
			return cl.res, cl.err
		case <-t.C:
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-cl.done:
		return cl.res, cl.err
	default:
	}
	cl.gone = true
	if bt := cl.batch; bt != nil {
		if bt.left--; bt.left == 0 && bt.cancel != nil {
			bt.cancel() // nobody waits for it any more
		}
	}
	return zero, ctx.Err()
}

// gathered sends req in one batch with the callers that arrived while its
// caller yielded, on the slot it took, and returns req's result. The
// caller holds b.mu; gathered releases it.
func (b *batcher[T]) gathered(ctx context.Context, req driver.Request, grace time.Duration) (T, error) {
	cl := &call[T]{ctx: ctx, req: req, grace: grace, done: make(chan struct{})}
	b.pending = slices.Insert(b.pending, 0, cl)
	calls := b.takeLocked()    // cl first: taken, or answered if ctx ended
	more := b.dispatchLocked() // what did not fit, on a free slot
	b.mu.Unlock()
	for _, calls := range more {
		b.c.spawn(func() { b.flush(calls) })
	}
	if len(calls) > 0 {
		b.send(calls)
	}
	b.done()
	<-cl.done
	return cl.res, cl.err
}

// done frees the slot of a call that returned, and sends the batches
// waiting for one.
func (b *batcher[T]) done() {
	b.mu.Lock()
	b.busy--
	batches := b.dispatchLocked()
	b.mu.Unlock()
	for _, calls := range batches {
		b.c.spawn(func() { b.flush(calls) })
	}
}

// dispatchLocked takes the next batches from the waiting callers, one per
// free slot; the caller holds b.mu and sends them.
func (b *batcher[T]) dispatchLocked() [][]*call[T] {
	var batches [][]*call[T]
	for len(b.pending) > 0 && b.busy < maxInflight {
		calls := b.takeLocked()
		if len(calls) == 0 {
			break
		}
		b.busy++
		batches = append(batches, calls)
	}
	return batches
}

// takeLocked takes the next batch from the waiting callers: up to b.max,
// in order, one per key (a later request for a key waits for the batch
// after); the callers whose ctx ended are answered at once. The caller
// holds b.mu.
func (b *batcher[T]) takeLocked() []*call[T] {
	var calls []*call[T]
	var keys map[string]struct{}
	if len(b.pending) > 1 {
		keys = make(map[string]struct{}, min(len(b.pending), b.max))
	}
	rest := b.pending[:0]
	for _, cl := range b.pending {
		if err := cl.ctx.Err(); err != nil {
			cl.err = err
			close(cl.done)
			continue
		}
		if _, dup := keys[cl.req.Key]; dup || len(calls) == b.max {
			rest = append(rest, cl)
			continue
		}
		if keys != nil {
			keys[cl.req.Key] = struct{}{}
		}
		calls = append(calls, cl)
	}
	clear(b.pending[len(rest):])
	b.pending = rest
	bt := &batch{left: len(calls)}
	for _, cl := range calls {
		cl.batch = bt
	}
	return calls
}

// flush sends calls, then batches that gathered meanwhile, until none is
// waiting.
func (b *batcher[T]) flush(calls []*call[T]) {
	for len(calls) > 0 {
		b.send(calls)
		b.mu.Lock()
		b.busy--
		batches := b.dispatchLocked()
		b.mu.Unlock()
		calls = nil
		for i, more := range batches {
			if i == 0 {
				calls = more // this goroutine sends it
				continue
			}
			b.c.spawn(func() { b.flush(more) })
		}
	}
}

// send makes one store call for calls and answers each caller. The call's
// context is detached from the callers': it ends when every caller gave up,
// or grace after the latest of their deadlines.
func (b *batcher[T]) send(calls []*call[T]) {
	var latest time.Time
	for _, cl := range calls {
		d, ok := cl.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if d = d.Add(cl.grace); d.After(latest) {
			latest = d
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !latest.IsZero() {
		ctx, cancel = context.WithDeadline(context.Background(), latest)
	}
	defer cancel()
	reqs := make([]driver.Request, len(calls))
	for i, cl := range calls {
		reqs[i] = cl.req
	}
	b.mu.Lock()
	bt := calls[0].batch
	bt.cancel = cancel
	if bt.left == 0 { // every caller gave up already
		cancel()
	}
	b.mu.Unlock()

	var res []T
	var errs []error
	if len(calls) == 1 {
		r, err := b.one(ctx, reqs[0])
		res, errs = []T{r}, []error{err}
	} else {
		res, errs = b.many(ctx, reqs)
		if len(res) != len(reqs) || len(errs) != len(reqs) {
			err := fmt.Errorf("lease: the store %T returned %d results and %d errors for %d requests", b.c.store, len(res), len(errs), len(reqs))
			res, errs = make([]T, len(reqs)), slices.Repeat([]error{err}, len(reqs))
		}
	}
	var undo []int
	b.mu.Lock()
	for i, cl := range calls {
		if cl.gone {
			undo = append(undo, i)
			continue
		}
		cl.res, cl.err = res[i], errs[i]
		close(cl.done)
	}
	b.mu.Unlock()
	if b.undo != nil {
		for _, i := range undo {
			b.undo(reqs[i], res[i], errs[i])
		}
	}
}

// newBatchers sets up the Client's coalesced acquisitions and releases, for
// the batch interfaces its store implements.
func (c *Client) newBatchers() {
	limit := maxBatch
	if m := c.caps.MaxBatch; m > 0 && m < limit {
		limit = m
	}
	if ba, ok := c.store.(driver.BatchAcquirer); ok {
		c.acquirer = &batcher[driver.Grant]{
			c: c, max: limit, one: c.store.Acquire, many: ba.AcquireMany,
			undo: func(req driver.Request, _ driver.Grant, err error) {
				// A caller gave up on its batch: what the store granted or
				// queued for it is nobody's.
				if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrQueueFull) {
					c.cleanup(req)
				}
			},
		}
	}
	if br, ok := c.store.(driver.BatchReleaser); ok {
		c.releaser = &batcher[struct{}]{
			c: c, max: limit,
			one: func(ctx context.Context, req driver.Request) (struct{}, error) {
				return struct{}{}, c.store.Release(ctx, req)
			},
			many: func(ctx context.Context, reqs []driver.Request) ([]struct{}, []error) {
				return make([]struct{}, len(reqs)), br.ReleaseMany(ctx, reqs)
			},
		}
	}
}

// storeAcquire asks the store for req, coalesced with other acquisitions
// when the store can batch them; the call may outlive ctx by grace.
func (c *Client) storeAcquire(ctx context.Context, req driver.Request, grace time.Duration) (driver.Grant, error) {
	if c.acquirer != nil {
		return c.acquirer.do(ctx, req, grace)
	}
	sctx, stop := graceCtx(ctx, grace)
	defer stop()
	return c.store.Acquire(sctx, req)
}

// storeRelease asks the store to release req, coalesced with other
// releases when the store can batch them.
func (c *Client) storeRelease(ctx context.Context, req driver.Request) error {
	if c.releaser != nil {
		_, err := c.releaser.do(ctx, req, 0)
		return err
	}
	return c.store.Release(ctx, req)
}
