package leaseurl_test

// Issue #28, item 8: every store caps its queue of waiters (max_waiters);
// a waiter beyond the cap gets lease.ErrQueueFull at once instead of
// costing the store an entry and its client a goroutine and memory.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/filelease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/leaseurl"
	"github.com/leasekit/lease/pglease"
	"github.com/leasekit/lease/redislease"
	"github.com/leasekit/lease/zklease"
)

// capStore is one store of the cap tests: a function that returns a fresh
// namespace's URL (without max_waiters) and whether the store's cap is exact
// (false: approximate, see docs/stores.md).
type capStore struct {
	name  string
	url   func(t *testing.T) string
	exact bool
}

func capStores() []capStore {
	stamp := func() int64 { return time.Now().UnixNano() }
	pg := func(mode string) func(t *testing.T) string {
		return func(t *testing.T) string {
			dsn := leasetest.Env(t, "LEASE_TEST_POSTGRES_DSN")
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			return fmt.Sprintf("%s%smode=%s&namespace=queuecap-%d", dsn, sep, mode, stamp())
		}
	}
	return []capStore{
		{"file", func(t *testing.T) string { return "file://" + filepath.Join(t.TempDir(), "leases") }, true},
		{"mem", func(t *testing.T) string { return fmt.Sprintf("mem://queuecap-%d", stamp()) }, true},
		{"redis", func(t *testing.T) string {
			return fmt.Sprintf("redis://%s/?prefix=queuecap-%d:", leasetest.Env(t, "LEASE_TEST_REDIS_ADDR"), stamp())
		}, true},
		{"postgres-table", pg("table"), true},
		{"postgres-advisory", pg("advisory"), true},
		{"etcd", func(t *testing.T) string {
			return fmt.Sprintf("etcd://%s/queuecap-%d/", leasetest.Env(t, "LEASE_TEST_ETCD_ENDPOINTS"), stamp())
		}, true},
		{"zk", func(t *testing.T) string {
			return fmt.Sprintf("zk://%s/queuecap-%d", leasetest.Env(t, "LEASE_TEST_ZK_SERVERS"), stamp())
		}, true},
	}
}

// withMax adds max_waiters=n to url.
func withMax(url string, n int) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return fmt.Sprintf("%s%smax_waiters=%d", url, sep, n)
}

func openStore(t *testing.T, ctx context.Context, url string) driver.Store {
	t.Helper()
	s, err := leaseurl.Open(ctx, url)
	if err != nil {
		t.Fatalf("Open(%s): %v", leaseurl.Redact(url), err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// capTTL is the TTL of the cap tests: long enough for a loaded host, within
// the store's limit (ZooKeeper's session timeout).
func capTTL(s driver.Store) time.Duration {
	ttl := 10 * time.Second
	if m := s.Caps().MaxTTL; m > 0 && m < ttl {
		ttl = m
	}
	return ttl
}

func newToken(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// queuedOn returns how many live waiters s reports queued on key: an
// unqueued Acquire of a new token is refused with all of them ahead.
func queuedOn(t *testing.T, ctx context.Context, s driver.Store, key string) int {
	t.Helper()
	_, err := s.Acquire(ctx, driver.Request{Key: key, Token: newToken(t), Holder: "probe", TTL: capTTL(s)})
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("probe of %q: %v, want a HeldError", key, err)
	}
	return he.Queued
}

// waitQueued waits until s reports n waiters queued on key. On ZooKeeper
// it counts the nodes of the root's only key instead of probing: a probe's
// node, however brief, sits in the queue and may get a newcomer refused as
// beyond the cap (documented in docs/stores.md).
func waitQueued(t *testing.T, ctx context.Context, s driver.Store, key string, n int) {
	t.Helper()
	for {
		if zs, ok := leaseurl.Unwrap(s).(*zklease.Store); ok {
			if zkNodes(t, zs)-1 >= n { // less the holder's node
				return
			}
		} else if queuedOn(t, ctx, s, key) >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d waiters never queued on %q", n, key)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// zkNodes counts the nodes of the only key under zs's root.
func zkNodes(t *testing.T, zs *zklease.Store) int {
	t.Helper()
	keys, _, err := zs.Conn().Children(zs.Root())
	if err != nil || len(keys) != 1 {
		return 0
	}
	nodes, _, err := zs.Conn().Children(zs.Root() + "/" + keys[0])
	if err != nil {
		return 0
	}
	return len(nodes)
}

// TestQueueBoundedOnEveryStore: each store opened with max_waiters=2, a
// key held and two Clients waiting for it: a third Client's Acquire fails at
// once with lease.ErrQueueFull (before the fix it was queued and waited),
// and the two queued waiters still get the key in turn.
func TestQueueBoundedOnEveryStore(t *testing.T) {
	for _, cs := range capStores() {
		t.Run(cs.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			url := withMax(cs.url(t), 2)
			probe := openStore(t, ctx, url)
			ttl := capTTL(probe)
			client := func(name string) *lease.Client {
				c, err := lease.New(openStore(t, ctx, url), lease.WithTTL(ttl), lease.WithHolder(name))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			key := "queue-cap"
			l, err := client("holder").Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				name string
				l    *lease.Lease
				err  error
			}
			got := make(chan result, 2)
			for i, name := range []string{"w1", "w2"} {
				c := client(name)
				go func() {
					l, err := c.Acquire(ctx, key)
					got <- result{name, l, err}
				}()
				waitQueued(t, ctx, probe, key, i+1)
			}
			start := time.Now()
			third, tcancel := context.WithTimeout(ctx, 5*time.Second)
			defer tcancel()
			_, err = client("w3").Acquire(third, key)
			var qf *lease.QueueFullError
			if !errors.Is(err, lease.ErrQueueFull) || !errors.As(err, &qf) || qf.Max != 2 || errors.Is(err, lease.ErrHeld) {
				t.Fatalf("third waiter after %v: %v; want a *QueueFullError with Max 2", time.Since(start).Round(time.Millisecond), err)
			}
			t.Logf("third waiter, refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
			for _, want := range []string{"w1", "w2"} {
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				r := <-got
				if r.err != nil {
					t.Fatalf("%s: %v", r.name, r.err)
				}
				if r.name != want {
					t.Errorf("%s got the key before %s", r.name, want)
				}
				l = r.l
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestQueueCapRace: many new waiters asking at once never leave more than
// max_waiters entries on an exact store (and no more than the documented
// slack on PostgreSQL's approximate cap); the others get ErrQueueFull.
func TestQueueCapRace(t *testing.T) {
	const capN, stores, perStore = 3, 3, 4 // 12 concurrent waiters, cap 3
	for _, cs := range capStores() {
		t.Run(cs.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			url := withMax(cs.url(t), capN)
			var ss []driver.Store
			for range stores {
				ss = append(ss, openStore(t, ctx, url))
			}
			ttl := capTTL(ss[0])
			key := "queue-cap-race"
			if _, err := ss[0].Acquire(ctx, driver.Request{Key: key, Token: newToken(t), Holder: "holder", TTL: ttl}); err != nil {
				t.Fatal(err)
			}
			var (
				mu           sync.Mutex
				queued, full int
				tokens       []driver.Request
				wg           sync.WaitGroup
			)
			startGate := make(chan struct{})
			for i := range stores * perStore {
				s := ss[i%stores]
				r := driver.Request{Key: key, Token: newToken(t), Holder: fmt.Sprint("w", i), TTL: ttl, Queue: true}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-startGate
					_, err := s.Acquire(ctx, r)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case errors.Is(err, lease.ErrHeld):
						queued++
						tokens = append(tokens, r)
					case errors.Is(err, lease.ErrQueueFull):
						full++
					default:
						t.Errorf("waiter %s: %v, want ErrHeld or ErrQueueFull", r.Holder, err)
					}
				}()
			}
			close(startGate)
			wg.Wait()
			n := queuedOn(t, ctx, ss[0], key)
			t.Logf("%d concurrent waiters, cap %d: %d queued, %d refused; the store counts %d", stores*perStore, capN, queued, full, n)
			if n != queued {
				t.Errorf("the store counts %d waiters, %d were told they are queued", n, queued)
			}
			limit := capN
			if !cs.exact {
				limit = stores*perStore - 1 // documented: by as many as join at the same instant
			}
			if queued > limit || queued < 1 {
				t.Errorf("%d waiters queued, want 1..%d", queued, limit)
			}
			// Every queued waiter that asks again keeps its place.
			for _, r := range tokens {
				s := ss[0]
				if _, err := s.Acquire(ctx, r); !errors.Is(err, lease.ErrHeld) {
					t.Errorf("queued waiter %s asking again: %v, want ErrHeld", r.Holder, err)
				}
			}
		})
	}
}

// TestMaxWaitersInvalid: max_waiters must be an integer in
// 1..driver.MaxMaxWaiters (at most filelease.MaxWaiters for file URLs); Open
// refuses others with ErrInvalid before connecting.
func TestMaxWaitersInvalid(t *testing.T) {
	ctx := context.Background()
	urls := []string{
		"file://" + t.TempDir(), "mem://maxwaiters-invalid", "redis://127.0.0.1:1/", "postgres://u@127.0.0.1:1/db",
		"etcd://127.0.0.1:1/", "zk://127.0.0.1:1", "redis+cluster://127.0.0.1:1",
	}
	for _, u := range urls {
		for _, v := range []string{"0", "-1", "x", "", "2000000", "99999999999999999999"} {
			s, err := leaseurl.Open(ctx, u+"?max_waiters="+v)
			if err == nil {
				_ = s.Close()
				t.Errorf("Open(%s?max_waiters=%s) succeeded", u, v)
				continue
			}
			if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "max") {
				t.Errorf("Open(%s?max_waiters=%s) = %v, want ErrInvalid naming max waiters", u, v, err)
			}
		}
	}
	if _, err := leaseurl.Open(ctx, "file://"+t.TempDir()+"?max_waiters=1025"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("file store with max_waiters=1025 (above filelease.MaxWaiters): %v, want ErrInvalid", err)
	}
	// The stores' own constructors refuse them too.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	pool, err := pgxpool.New(ctx, "postgres://u@127.0.0.1:1/db")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, n := range []int{0, -1, driver.MaxMaxWaiters + 1} {
		if _, err := redislease.New(rdb, redislease.WithMaxWaiters(n)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("redislease.WithMaxWaiters(%d): %v, want ErrInvalid", n, err)
		}
		if _, err := pglease.New(pool, pglease.WithMaxWaiters(n)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("pglease.WithMaxWaiters(%d): %v, want ErrInvalid", n, err)
		}
		if _, err := filelease.New(t.TempDir(), filelease.WithMaxWaiters(n)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("filelease.WithMaxWaiters(%d): %v, want ErrInvalid", n, err)
		}
	}
	a, err := leaseurl.Open(ctx, "mem://maxwaiters-mismatch?max_waiters=3")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if b, err := leaseurl.Open(ctx, "mem://maxwaiters-mismatch?max_waiters=4"); !errors.Is(err, lease.ErrInvalid) {
		if err == nil {
			_ = b.Close()
		}
		t.Errorf("second mem Open with another max_waiters: %v, want ErrInvalid", err)
	}
}
