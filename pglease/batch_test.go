// AcquireMany and ReleaseMany of the table store, called directly.

package pglease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/pglease"
)

// batchCounter counts the queries and batches a pool sends.
type batchCounter struct{ n atomic.Int64 }

func (c *batchCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *batchCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *batchCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *batchCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *batchCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func TestBatchTable(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	cfg, err := pgxpool.ParseConfig(sharedDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	var trips batchCounter
	cfg.ConnConfig.Tracer = &trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrate(t, pool)
	s := newStore(t, pool, pglease.ModeTable)
	b := s.(interface {
		driver.BatchAcquirer
		driver.BatchReleaser
	})
	held := req("b", "other", 10*time.Second)
	if _, err := s.Acquire(ctx, held); err != nil {
		t.Fatal(err)
	}
	rs := []driver.Request{req("c", "me", 10*time.Second), held, req("b", "me", 10*time.Second),
		{Key: "e", Holder: "me", TTL: 10 * time.Second}, req("a", "me", 10*time.Second)}
	rs[1].Token = held.Token // a retry of the holder: same fence
	rs[2].Key, rs[2].Queue = "d", true
	holder := req("d", "other", 10*time.Second)
	if _, err := s.Acquire(ctx, holder); err != nil {
		t.Fatal(err)
	}
	trips.n.Store(0)
	gs, errs := b.AcquireMany(ctx, rs)
	if n := trips.n.Load(); n != 1 {
		t.Errorf("AcquireMany of %d: %d round trips, want 1", len(rs), n)
	}
	var he *lease.HeldError
	switch {
	case errs[0] != nil || errs[1] != nil || errs[4] != nil:
		t.Fatalf("AcquireMany: %v", errs)
	case !errors.As(errs[2], &he) || he.Holder != "other":
		t.Errorf("held key: %v, want a HeldError naming other", errs[2])
	case !errors.Is(errs[3], lease.ErrInvalid):
		t.Errorf("empty token: %v, want ErrInvalid", errs[3])
	case gs[0].Fence == 0 || gs[4].Fence == 0:
		t.Errorf("grants %+v without fence", gs)
	}
	if info, _ := s.Inspect(ctx, "b"); info.Fence != gs[1].Fence {
		t.Errorf("holder's retry: fence %d, key has %d", gs[1].Fence, info.Fence)
	}
	// FIFO: rs[2] was queued by the batch, so once d's holder leaves, a
	// newcomer is refused and rs[2] gets d.
	if err := s.Release(ctx, holder); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, req("d", "newcomer", 10*time.Second)); !errors.As(err, &he) || he.Queued != 1 {
		t.Errorf("newcomer behind a waiter the batch queued: %v, want a HeldError with 1 queued", err)
	}
	if gs, errs := b.AcquireMany(ctx, rs[2:3]); errs[0] != nil || gs[0].Fence == 0 {
		t.Errorf("the waiter's turn: %+v, %v", gs, errs)
	}
	// Release: two held, one not held; then the fence grows on a new grant.
	trips.n.Store(0)
	rel := b.ReleaseMany(ctx, []driver.Request{rs[0], rs[2], rs[4]})
	if n := trips.n.Load(); n != 1 {
		t.Errorf("ReleaseMany of 3: %d round trips, want 1", n)
	}
	if rel[0] != nil || rel[1] != nil || rel[2] != nil {
		t.Errorf("ReleaseMany: %v", rel)
	}
	if rel := b.ReleaseMany(ctx, []driver.Request{rs[0], held}); !errors.Is(rel[0], lease.ErrNotHeld) || rel[1] != nil {
		t.Errorf("ReleaseMany of a released lease and a held one: %v, want ErrNotHeld, nil", rel)
	}
	again := []driver.Request{req("a", "me", 10*time.Second), req("c", "me", 10*time.Second)}
	gs2, errs := b.AcquireMany(ctx, again)
	if errs[0] != nil || errs[1] != nil || gs2[0].Fence <= gs[4].Fence || gs2[1].Fence <= gs[0].Fence {
		t.Errorf("after release: %+v %v, want larger fences than %d, %d", gs2, errs, gs[4].Fence, gs[0].Fence)
	}
}
