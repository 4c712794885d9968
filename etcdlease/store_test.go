// etcd-specific store behaviour: TTL rounding and limits, one etcd lease
// per TTL, round trips per operation, loss of the etcd lease, release
// announcements on release and expiry.

package etcdlease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/etcdlease"
)

func req(key string, ttl time.Duration) lease.Request {
	return lease.Request{Key: key, Token: randHex(16), Holder: "holder-" + key, TTL: ttl}
}

// leaseOf returns the etcd lease of prefix+key and its granted TTL.
func leaseOf(t *testing.T, ctx context.Context, cli *clientv3.Client, prefix, key string) (clientv3.LeaseID, int64) {
	t.Helper()
	resp, err := cli.Get(ctx, prefix+key)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("Get(%q) = %v, %v; want the key", prefix+key, resp, err)
	}
	id := clientv3.LeaseID(resp.Kvs[0].Lease)
	ttl, err := cli.TimeToLive(ctx, id)
	if err != nil {
		t.Fatalf("TimeToLive(%x): %v", id, err)
	}
	return id, ttl.GrantedTTL
}

func TestStoreTTLs(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	prefix := testPrefix()
	s := newStore(t, cli, prefix)
	if lim := s.Limits(); lim.MinTTL != etcdlease.MinTTL || lim.MaxTTL != etcdlease.MaxTTL {
		t.Errorf("Limits() = %+v", lim)
	}
	for _, ttl := range []time.Duration{0, time.Second, etcdlease.MinTTL - time.Millisecond, etcdlease.MaxTTL + time.Second} {
		if _, err := s.Acquire(ctx, req("bad", ttl)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Acquire with TTL %v: %v, want ErrInvalid", ttl, err)
		}
	}
	// TTLs round up to whole seconds; keys with the same rounded TTL share
	// one etcd lease, other TTLs get their own.
	keys := map[string]time.Duration{"a": 2 * time.Second, "b": 2 * time.Second, "c": 2100 * time.Millisecond, "d": 3 * time.Second}
	for k, ttl := range keys {
		if _, err := s.Acquire(ctx, req(k, ttl)); err != nil {
			t.Fatalf("Acquire(%q, %v): %v", k, ttl, err)
		}
	}
	ida, ttla := leaseOf(t, ctx, cli, prefix, "a")
	idb, _ := leaseOf(t, ctx, cli, prefix, "b")
	idc, ttlc := leaseOf(t, ctx, cli, prefix, "c")
	idd, _ := leaseOf(t, ctx, cli, prefix, "d")
	if ttla != 2 || ttlc != 3 {
		t.Errorf("granted TTLs: %ds for 2s, %ds for 2.1s; want 2 and 3", ttla, ttlc)
	}
	if ida != idb {
		t.Errorf("keys with the same TTL are on different etcd leases %x and %x", ida, idb)
	}
	if idc != idd || idc == ida {
		t.Errorf("etcd leases: 2.1s on %x, 3s on %x, 2s on %x; want 2.1s and 3s shared, 2s apart", idc, idd, ida)
	}
	// Another store has its own etcd leases.
	s2 := newStore(t, cli, prefix)
	if _, err := s2.Acquire(ctx, req("e", 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if ide, _ := leaseOf(t, ctx, cli, prefix, "e"); ide == ida {
		t.Errorf("two stores share etcd lease %x", ide)
	}
}

// counter counts gRPC calls (unary calls and streams opened) per method.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *counter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method[strings.LastIndex(method, "/")+1:]]++
}

// take returns the counts since the last take.
func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.calls
	c.calls = make(map[string]int)
	return m
}

func countingCli(t *testing.T) (*clientv3.Client, *counter) {
	cnt := &counter{calls: make(map[string]int)}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints(t),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				cnt.add(method)
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
	return cli, cnt
}

func TestStoreRoundTrips(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli, cnt := countingCli(t)
	s := newStore(t, cli, testPrefix())
	logged := false
	want := func(op string, exp map[string]int) {
		t.Helper()
		got := cnt.take()
		total := 0
		for _, n := range got {
			total += n
		}
		ok := len(got) == len(exp)
		for m, n := range exp {
			ok = ok && got[m] == n
		}
		if op != "Acquire" || !logged {
			t.Logf("%s: %d round trips %v", op, total, got)
			logged = logged || op == "Acquire"
		}
		if !ok {
			t.Errorf("%s: calls %v, want %v", op, got, exp)
		}
	}
	var rs []lease.Request
	for i := range 20 {
		r := req("k"+string(rune('a'+i)), 2*time.Second)
		rs = append(rs, r)
		cnt.take()
		g, err := s.Acquire(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			want("first Acquire", map[string]int{"LeaseGrant": 1, "Txn": 1})
		} else {
			// The store's etcd lease was refreshed (granted) less than
			// half a TTL ago: no keep-alive, and the grant says since when
			// the key's TTL runs.
			want("Acquire", map[string]int{"Txn": 1})
			if g.Since <= 0 || g.Since >= time.Second {
				t.Errorf("Acquire %d: Grant.Since = %v, want in (0, 1s): the TTL runs from the etcd lease's last refresh", i, g.Since)
			}
		}
	}
	for i, err := range s.RenewMany(ctx, rs) {
		if err != nil {
			t.Errorf("RenewMany[%d]: %v", i, err)
		}
	}
	// The first round reads the keys and starts the renewal watch; later
	// rounds are one keep-alive (see TestRenewRoundTrips).
	want("first RenewMany of 20 keys", map[string]int{"LeaseKeepAlive": 1, "Txn": 1, "Watch": 1})
	time.Sleep(roundGap)
	if err := s.Renew(ctx, rs[0]); err != nil {
		t.Fatal(err)
	}
	want("Renew", map[string]int{"LeaseKeepAlive": 1})
	if _, err := s.Inspect(ctx, rs[0].Key); err != nil {
		t.Fatal(err)
	}
	want("Inspect", map[string]int{"Range": 1})
	if err := s.Release(ctx, rs[0]); err != nil {
		t.Fatal(err)
	}
	want("Release", map[string]int{"Txn": 1})
	_, err := s.Acquire(ctx, lease.Request{Key: rs[1].Key, Token: randHex(16), TTL: 2 * time.Second})
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire of a held key: %v", err)
	}
	want("Acquire of a held key", map[string]int{"Txn": 1})
	// Once the etcd lease's last refresh is half a TTL old, Acquire
	// refreshes it first.
	time.Sleep(time.Second)
	if _, err := s.Acquire(ctx, req("fresh", 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	want("Acquire after half a TTL", map[string]int{"LeaseKeepAlive": 1, "Txn": 1})
}

// TestStoreLeaseLost: when the store's etcd lease disappears (here revoked
// behind its back), every key on it reports ErrNotHeld, every Grant.Lost of
// it closes, and the next Acquire gets a new etcd lease.
func TestStoreLeaseLost(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	prefix := testPrefix()
	s := newStore(t, cli, prefix)
	var rs []lease.Request
	var gs []lease.Grant
	for _, k := range []string{"x", "y", "z"} {
		r := req(k, 2*time.Second)
		g, err := s.Acquire(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if g.Lost == nil {
			t.Fatal("Grant.Lost is nil")
		}
		rs, gs = append(rs, r), append(gs, g)
	}
	id, _ := leaseOf(t, ctx, cli, prefix, "x")
	if _, err := cli.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		select {
		case <-g.Lost:
			t.Fatal("Grant.Lost closed before the store could know")
		default:
		}
	}
	for i, err := range s.RenewMany(ctx, rs[:2]) {
		if !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("RenewMany[%d] after the revoke: %v, want ErrNotHeld", i, err)
		}
	}
	for i, g := range gs {
		select {
		case <-g.Lost:
		default:
			t.Errorf("Grant.Lost of key %d (on the revoked etcd lease) is not closed", i)
		}
	}
	if _, err := s.Acquire(ctx, rs[2]); err != nil {
		t.Fatalf("Acquire after the loss: %v", err)
	}
	if nid, _ := leaseOf(t, ctx, cli, prefix, "z"); nid == id {
		t.Errorf("Acquire after the loss reused the revoked etcd lease %x", id)
	}

	// Through a Client: every lease on the etcd lease is reported lost.
	c, err := lease.New(newStore(t, cli, prefix), lease.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ls []*lease.Lease
	for _, k := range []string{"p", "q", "r"} {
		l, err := c.TryAcquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	id, _ = leaseOf(t, ctx, cli, prefix, "p")
	revoked := time.Now()
	if _, err := cli.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		select {
		case <-l.Done():
			t.Logf("%q lost %v after the revoke: %v", l.Key(), time.Since(revoked).Round(time.Millisecond), l.Err())
		case <-time.After(2 * time.Second):
			t.Fatalf("%q not reported lost within 2s of its etcd lease's revocation", l.Key())
		}
		if !errors.Is(l.Err(), lease.ErrLost) {
			t.Errorf("%q: Err() = %v, want ErrLost", l.Key(), l.Err())
		}
	}
}

// TestSubscribe: the subscription announces releases and expiries.
func TestSubscribe(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	s := newStore(t, cli, testPrefix())
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Subscribe(cancelled); err == nil {
		t.Error("Subscribe with a cancelled ctx succeeded")
	}
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	next := func(want string, d time.Duration) {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		got, err := sub.Next(nctx)
		if err != nil || got != want {
			t.Fatalf("Next = %q, %v; want %q", got, err, want)
		}
	}
	released := req("released/key", 2*time.Second)
	if _, err := s.Acquire(ctx, released); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, released); err != nil {
		t.Fatal(err)
	}
	next("released/key", time.Second)
	other := newStore(t, cli, s.Prefix()) // a holder that never renews
	start := time.Now()
	if _, err := other.Acquire(ctx, req("expiring", 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	next("expiring", 5*time.Second)
	t.Logf("expiry announced %v after the acquire", time.Since(start).Round(time.Millisecond))
	if err := sub.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := sub.Next(ctx); err == nil {
		t.Error("Next after Close succeeded")
	}
}

func TestNewInvalid(t *testing.T) {
	if _, err := etcdlease.New(nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New(nil): %v, want ErrInvalid", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := etcdlease.New(cli, etcdlease.WithPrefix("")); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New with an empty prefix: %v, want ErrInvalid", err)
	}
	if _, err := etcdlease.New(cli, nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New with a nil option: %v, want ErrInvalid", err)
	}
}
