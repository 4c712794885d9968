// AcquireMany and ReleaseMany, called directly, over more keys than one
// transaction takes.

package etcdlease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

func TestBatchEtcd(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	var mu sync.Mutex
	calls := map[string]int{}
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		calls[method]++
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(t), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	s := newStore(t, cli, testPrefix())
	const n = 200 // two transactions of reads, two of writes
	rs := make([]driver.Request, n)
	for i := range rs {
		rs[i] = driver.Request{Key: fmt.Sprintf("k%03d", i), Token: randHex(16), Holder: "me", TTL: suiteTTL}
	}
	other := []driver.Request{{Key: "k005", Token: randHex(16), Holder: "other", TTL: 10 * time.Second},
		{Key: "k150", Token: randHex(16), Holder: "other", TTL: 10 * time.Second}}
	for _, r := range append(other, rs[10]) {
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := s.Inspect(ctx, "k010")
	txns := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := calls["/etcdserverpb.KV/Txn"]
		clear(calls)
		return n
	}
	txns()
	gs, errs := s.AcquireMany(ctx, rs)
	var he *lease.HeldError
	for i, err := range errs {
		switch {
		case i == 5 || i == 150:
			if !errors.As(err, &he) || he.Holder != "other" {
				t.Errorf("%s: %v, want a HeldError naming other", rs[i].Key, err)
			}
		case err != nil:
			t.Errorf("%s: %v", rs[i].Key, err)
		case i == 10 && gs[i].Fence != before.Fence:
			t.Errorf("the holder's retry: fence %d, want %d", gs[i].Fence, before.Fence)
		case gs[i].Fence == 0:
			t.Errorf("%s: no fence", rs[i].Key)
		}
	}
	// A read per 100 keys, then a write per key newly granted.
	if got, want := txns(), 2+n-3; got != want {
		t.Errorf("AcquireMany of %d: %d transactions, want %d", n, got, want)
	}
	errs = s.ReleaseMany(ctx, rs)
	if got := txns(); got != 2 {
		t.Errorf("ReleaseMany of %d: %d transactions, want 2", n, got)
	}
	for i, err := range errs {
		if (i == 5 || i == 150) != errors.Is(err, lease.ErrNotHeld) || (i != 5 && i != 150 && err != nil) {
			t.Errorf("release %s: %v", rs[i].Key, err)
		}
	}
	for _, r := range other {
		if info, err := s.Inspect(ctx, r.Key); err != nil || info.Holder != "other" {
			t.Errorf("%s after the batch: %+v, %v, want held by other", r.Key, info, err)
		}
	}
	if info, err := s.Inspect(ctx, "k042"); err != nil || info.Held {
		t.Errorf("k042 after release: %+v, %v, want free", info, err)
	}
}
