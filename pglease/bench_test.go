// BenchmarkContention: acquire/release cycles through lease.Client by 1, 8
// and 64 clients on one key and on 64 keys, in table and advisory mode, on a
// private PostgreSQL server (fsync on). Reports ops/s, p50/p99 acquire
// latency, p50/p99 hand-off latency (from the holder's Release call to a
// waiting client's Acquire returning), retake-% (acquisitions by the key's
// previous holder while another client was waiting) and fifo-% (acquisitions,
// while others waited, that went to the client that had waited longest).
// Run:
//
//	go test -run '^$' -bench BenchmarkContention -benchtime 2000x ./pglease/

package pglease_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/pglease"
)

func BenchmarkContention(b *testing.B) {
	pg := startPrivatePG(b, "max_connections=400", "shared_buffers=64MB")
	for _, mode := range modes {
		for _, keys := range []int{1, 64} {
			for _, clients := range []int{1, 8, 64} {
				b.Run(fmt.Sprintf("%v/keys=%d/clients=%d", mode, keys, clients), func(b *testing.B) {
					benchContention(b, pg, mode, keys, clients)
				})
			}
		}
	}
}

// keyState records when a key was last released, by whom, and who waits.
type keyState struct {
	mu       sync.Mutex
	released time.Time
	last     int               // the client that held the key last (-1: none)
	waiting  map[int]time.Time // client -> when it started to Acquire
}

func benchContention(b *testing.B, pg *privatePG, mode pglease.Mode, nkeys, nclients int) {
	pool := newPool(b, pg.DSN(), int32(nclients+8))
	migrate(b, pool)
	ns := namespace(b)
	keys := make([]string, nkeys)
	states := make([]*keyState, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-%d", i)
		states[i] = &keyState{last: -1, waiting: make(map[int]time.Time)}
	}
	cs := make([]*lease.Client, nclients)
	for i := range cs {
		cs[i] = newClient(b, storeNS(b, pool, mode, ns, pglease.WithMaxIdleConns(1)), lease.WithTTL(10*time.Second))
	}
	ctx := testCtx(b, 10*time.Minute)
	var (
		next                     atomic.Int64
		mu                       sync.Mutex
		acquire                  []time.Duration
		handoff                  []time.Duration
		failures                 atomic.Int64
		contended, retakes, fifo atomic.Int64
		wg                       sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for me, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var acq, hand []time.Duration
			for next.Add(1) <= int64(b.N) {
				i := rand.IntN(nkeys)
				st := states[i]
				st.mu.Lock()
				t0 := time.Now()
				st.waiting[me] = t0
				st.mu.Unlock()
				l, err := c.Acquire(ctx, keys[i])
				t1 := time.Now()
				st.mu.Lock()
				delete(st.waiting, me)
				if err != nil {
					st.mu.Unlock()
					failures.Add(1)
					continue
				}
				acq = append(acq, t1.Sub(t0))
				if st.released.After(t0) {
					hand = append(hand, t1.Sub(st.released))
				}
				if len(st.waiting) > 0 {
					// Others were waiting: was it fair?
					contended.Add(1)
					if st.last == me {
						retakes.Add(1)
					}
					longest := true
					for _, w := range st.waiting {
						if w.Before(t0) {
							longest = false
						}
					}
					if longest {
						fifo.Add(1)
					}
				}
				st.last = me
				st.mu.Unlock()
				rel := time.Now()
				st.mu.Lock()
				st.released = rel
				st.mu.Unlock()
				if err := l.Release(context.Background()); err != nil {
					failures.Add(1)
				}
			}
			mu.Lock()
			acquire = append(acquire, acq...)
			handoff = append(handoff, hand...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Errorf("%d acquire/release failures", n)
	}
	b.ReportMetric(float64(len(acquire))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(pct(acquire, 50), "p50-acq-ms")
	b.ReportMetric(pct(acquire, 99), "p99-acq-ms")
	b.ReportMetric(pct(handoff, 50), "p50-handoff-ms")
	b.ReportMetric(pct(handoff, 99), "p99-handoff-ms")
	if n := contended.Load(); n > 0 {
		b.ReportMetric(100*float64(retakes.Load())/float64(n), "retake-%")
		b.ReportMetric(100*float64(fifo.Load())/float64(n), "fifo-%")
	}
}

// pct returns the p-th percentile of ds in milliseconds (0 if empty).
func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := (len(ds)*p + 99) / 100
	i = min(max(i-1, 0), len(ds)-1)
	return float64(ds[i]) / float64(time.Millisecond)
}
