// Releases that fail: the key they leave on the store's shared etcd lease
// (which the store's other operations keep alive) is deleted by the store's
// next operation, only if it still carries the released token, so that a
// waiter eventually gets it.

package etcdlease_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/etcdlease"
)

// Modes of txnFault.
const (
	failNone   int32 = iota
	failBefore       // the next Txn fails without being sent
	failAfter        // the next Txn is applied by etcd, then its response is lost
)

// txnFault makes the next Txn of a client fail once armed.
type txnFault struct{ mode atomic.Int32 }

func (f *txnFault) arm(mode int32) { f.mode.Store(mode) }

// faultyCli returns an etcd client whose Txns fail as f says, counting its
// calls like countingCli.
func faultyCli(t *testing.T) (*clientv3.Client, *txnFault, *counter) {
	f := &txnFault{}
	cnt := &counter{calls: make(map[string]int)}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints(t),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				cnt.add(method)
				if strings.HasSuffix(method, "/Txn") {
					switch f.mode.Swap(failNone) {
					case failBefore:
						return status.Error(codes.Unavailable, "injected fault: transaction not sent")
					case failAfter:
						if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
							return err
						}
						return status.Error(codes.Unavailable, "injected fault: transaction applied, response lost")
					}
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				cnt.add(method)
				return streamer(ctx, desc, cc, method, opts...)
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli, f, cnt
}

// TestOrphanedRelease: a Release that fails leaves its key on the store's
// shared etcd lease; the store's next Acquire, RenewMany or Release deletes
// it with one extra transaction, conditioned on the released token, and
// forgets it once deleted or found taken over.
func TestOrphanedRelease(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli, fault, cnt := faultyCli(t)
	prefix := testPrefix()
	s := newStore(t, cli, prefix)
	other := newStore(t, newCli(t, endpoints(t)), prefix)
	const ttl = 2 * time.Second
	calls := func(op string, exp map[string]int) {
		t.Helper()
		got := cnt.take()
		ok := len(got) == len(exp)
		for m, n := range exp {
			ok = ok && got[m] == n
		}
		if !ok {
			t.Errorf("%s: calls %v, want %v", op, got, exp)
		}
	}
	held := func(key string, want lease.Request, fence uint64) {
		t.Helper()
		info, err := other.Inspect(ctx, key)
		if err != nil || !info.Held || info.Holder != want.Holder || info.Fence != fence {
			t.Errorf("Inspect(%q) = %+v, %v; want held by %q with fence %d", key, info, err, want.Holder, fence)
		}
	}
	free := func(key string) {
		t.Helper()
		if info, err := other.Inspect(ctx, key); err != nil || info.Held {
			t.Errorf("Inspect(%q) = %+v, %v; want free", key, info, err)
		}
	}
	acquire := func(st *etcdlease.Store, r lease.Request) uint64 {
		t.Helper()
		g, err := st.Acquire(ctx, r)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", r.Key, err)
		}
		return g.Fence
	}
	failRelease := func(r lease.Request, mode int32) {
		t.Helper()
		fault.arm(mode)
		err := s.Release(ctx, r)
		if err == nil || errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Release(%q) with an injected fault: %v, want a transient error", r.Key, err)
		}
	}

	// A release that never reached etcd: the key stays on the shared etcd
	// lease, which the renewal of another key keeps alive; that renewal
	// deletes it first (one more transaction), and the next has no extra.
	keep := req("keep", ttl)
	acquire(s, keep)
	r1 := req("k1", ttl)
	f1 := acquire(s, r1)
	failRelease(r1, failBefore)
	held("k1", r1, f1)
	cnt.take()
	for i, err := range s.RenewMany(ctx, []lease.Request{keep}) {
		if err != nil {
			t.Fatalf("RenewMany[%d]: %v", i, err)
		}
	}
	// (The first renewal also reads the key and starts the renewal watch.)
	calls("RenewMany after a failed release", map[string]int{"LeaseKeepAlive": 1, "Txn": 2, "Watch": 1})
	free("k1")
	time.Sleep(roundGap)
	if err := s.Renew(ctx, keep); err != nil {
		t.Fatal(err)
	}
	calls("the next Renew", map[string]int{"LeaseKeepAlive": 1})

	// A release applied by etcd whose response was lost, after which
	// another token took the key: the clean-up must leave it alone.
	r2 := req("k2", ttl)
	acquire(s, r2)
	failRelease(r2, failAfter)
	free("k2")
	r3 := req("k2", ttl)
	f3 := acquire(other, r3)
	cnt.take()
	acquire(s, req("k2b", ttl))
	calls("Acquire after a failed release", map[string]int{"Txn": 2})
	held("k2", r3, f3)
	acquire(s, req("k2c", ttl))
	calls("the next Acquire", map[string]int{"Txn": 1})

	// The same store waiting for the orphaned key gets it at its first
	// attempt: the clean-up comes before its transaction.
	r4 := req("k4", ttl)
	f4 := acquire(s, r4)
	failRelease(r4, failBefore)
	held("k4", r4, f4)
	r5 := req("k4", ttl)
	cnt.take()
	f5 := acquire(s, r5)
	calls("Acquire of the orphaned key", map[string]int{"Txn": 2})
	if f5 <= f4 {
		t.Errorf("re-acquired k4 with fence %d, want > %d", f5, f4)
	}
	held("k4", r5, f5)

	// A retried Release of an orphan deletes it itself (no extra
	// transaction) and succeeds, rather than finding it gone.
	failRelease(r5, failBefore)
	cnt.take()
	if err := s.Release(ctx, r5); err != nil {
		t.Fatalf("retried Release: %v", err)
	}
	calls("retried Release", map[string]int{"Txn": 1})
	free("k4")

	// A Release of another key cleans up first too.
	r6 := req("k6", ttl)
	acquire(s, r6)
	failRelease(r6, failBefore)
	cnt.take()
	if err := s.Release(ctx, keep); err != nil {
		t.Fatal(err)
	}
	calls("Release after a failed release", map[string]int{"Txn": 2})
	free("k6")
}

// TestOrphanedReleaseClient: the liveness bug this guards against. A
// Client's Release fails (here: its ctx is already cancelled); the Client
// keeps renewing another lease on the same etcd lease, or waits for the key
// itself, which refreshes that etcd lease before every attempt. Without the
// clean-up the key would stay held for as long as the Client runs; with it,
// a waiter of another Client, and then the Client itself, get their keys.
func TestOrphanedReleaseClient(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	eps := endpoints(t)
	prefix := testPrefix()
	const ttl = 2 * time.Second
	a := newLeaseClient(t, eps, prefix, lease.WithTTL(ttl))
	b := newLeaseClient(t, eps, prefix, lease.WithTTL(ttl))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	k, err := a.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.TryAcquire(ctx, "h") // renewed by a's heartbeat throughout
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Release(cancelled); err == nil || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release with a cancelled ctx: %v, want the ctx's error", err)
	}
	// 10 TTLs: far more than the clean-up needs (a's next renewal, within
	// TTL/3), and the key would never be freed without it.
	wctx, wcancel := context.WithTimeout(ctx, 10*ttl)
	defer wcancel()
	start := time.Now()
	kb, err := b.Acquire(wctx, "k")
	if err != nil {
		info, _ := b.Inspect(ctx, "k")
		t.Fatalf("another client waiting for the key a failed to release: %v (Inspect: %+v)", err, info)
	}
	t.Logf("another client got the key %v after the failed release", time.Since(start).Round(time.Millisecond))
	if kb.Fence() <= k.Fence() {
		t.Errorf("fence %d after the clean-up, want > %d", kb.Fence(), k.Fence())
	}

	// Now a holds nothing; its own waiting for h is what would keep h's
	// etcd lease (and h) alive.
	if err := h.Release(cancelled); err == nil || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release with a cancelled ctx: %v, want the ctx's error", err)
	}
	wctx2, wcancel2 := context.WithTimeout(ctx, 10*ttl)
	defer wcancel2()
	start = time.Now()
	h2, err := a.Acquire(wctx2, "h")
	if err != nil {
		info, _ := a.Inspect(ctx, "h")
		t.Fatalf("the client waiting for the key it failed to release: %v (Inspect: %+v)", err, info)
	}
	t.Logf("the same client got the key back %v after the failed release", time.Since(start).Round(time.Millisecond))
	if h2.Fence() <= h.Fence() {
		t.Errorf("fence %d after the clean-up, want > %d", h2.Fence(), h.Fence())
	}
	for _, l := range []*lease.Lease{kb, h2} {
		if err := l.Release(ctx); err != nil {
			t.Errorf("Release(%q): %v", l.Key(), err)
		}
	}
}
