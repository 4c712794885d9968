package leaseprom_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leaseprom"
	"github.com/leasekit/lease/memlease"
)

// story acquires, renews, loses and releases leases on an in-memory store
// with c as the observer.
func story(t *testing.T, c *leaseprom.Collector) {
	t.Helper()
	ctx := context.Background()
	mem := memlease.New()
	t.Cleanup(func() { _ = mem.Close() })
	// The lost event reaches the observer just after b's Done closes (a
	// loss cancels first): tee waits for it before the story ends.
	tee := &lostTee{next: c, lost: make(chan struct{}, 1)}
	client, err := lease.New(mem.Handle(), lease.WithObserver(tee), lease.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	other, err := lease.New(mem.Handle(), lease.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })

	a, err := client.TryAcquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.TryAcquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	// c waits for a held key: one acquisition with a measurable wait.
	hold, err := other.TryAcquire(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(150 * time.Millisecond); _ = hold.Release(ctx) }()
	if _, err := client.Acquire(ctx, "c"); err != nil { // still held at the end
		t.Fatal(err)
	}
	// Let the heartbeat renew a few times.
	time.Sleep(400 * time.Millisecond)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Lose b: free its token behind the client's back; the next renewal
	// gets ErrNotHeld.
	if err := mem.Release(ctx, driver.Request{Key: "b", Token: b.Token()}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("b was not lost")
	}
	if !errors.Is(b.Err(), lease.ErrLost) {
		t.Fatalf("b.Err() = %v, want ErrLost", b.Err())
	}
	select {
	case <-tee.lost:
	case <-time.After(5 * time.Second):
		t.Fatal("the observer did not see b's loss")
	}
}

// lostTee passes events to next and signals lost after a loss was passed on.
type lostTee struct {
	next lease.Observer
	lost chan struct{}
}

func (o *lostTee) Observe(ev lease.Event) {
	o.next.Observe(ev)
	if ev.Kind == lease.EventLost {
		select {
		case o.lost <- struct{}{}:
		default:
		}
	}
}

func TestCollectorCounts(t *testing.T) {
	c := leaseprom.New()
	story(t, c)
	for name, want := range map[string]float64{
		"lease_acquired_total": 3,
		"lease_released_total": 1,
		"lease_held":           1,
	} {
		if got := testutil.ToFloat64(collectorFor(t, c, name)); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP lease_lost_total Leases lost while held, by reason (deadline, not_held, session, max_hold, broken).
# TYPE lease_lost_total counter
lease_lost_total{reason="broken"} 0
lease_lost_total{reason="deadline"} 0
lease_lost_total{reason="max_hold"} 0
lease_lost_total{reason="not_held"} 1
lease_lost_total{reason="session"} 0
`), "lease_lost_total"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "lease_heartbeat_latency_seconds":
			if n := mf.GetMetric()[0].GetHistogram().GetSampleCount(); n < 2 {
				t.Errorf("heartbeat latency has %d samples, want at least 2 renewals", n)
			}
		case "lease_acquire_wait_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 3 || h.GetSampleSum() < 0.1 {
				t.Errorf("acquire wait: %d samples, sum %v; want 3 and ≥ 0.1 s (one acquisition waited 150 ms)", h.GetSampleCount(), h.GetSampleSum())
			}
		case "lease_renewals_total":
			if v := mf.GetMetric()[0].GetCounter().GetValue(); v < 2 {
				t.Errorf("renewals = %v, want ≥ 2", v)
			}
		}
	}
}

// collectorFor returns a collector with only the metric name of c.
func collectorFor(t *testing.T, c *leaseprom.Collector, name string) prometheus.Collector {
	t.Helper()
	return filter{c, name}
}

type filter struct {
	c    prometheus.Collector
	name string
}

func (f filter) Describe(ch chan<- *prometheus.Desc) {
	all := make(chan *prometheus.Desc, 64)
	f.c.Describe(all)
	close(all)
	for d := range all {
		if strings.Contains(d.String(), `fqName: "`+f.name+`"`) {
			ch <- d
		}
	}
}

func (f filter) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 256)
	f.c.Collect(all)
	close(all)
	for m := range all {
		if strings.Contains(m.Desc().String(), `fqName: "`+f.name+`"`) {
			ch <- m
		}
	}
}

func TestKeyLabelIsOptIn(t *testing.T) {
	plain := leaseprom.New()
	keyed := leaseprom.New(leaseprom.WithKeyLabel(), leaseprom.WithConstLabels(prometheus.Labels{"app": "billing"}))
	both := lease.ObserverFunc(func(e lease.Event) { plain.Observe(e); keyed.Observe(e) })
	ctx := context.Background()
	mem := memlease.New()
	defer mem.Close()
	client, err := lease.New(mem, lease.WithObserver(both))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	l, err := client.TryAcquire(ctx, "job:invoice-generation")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	plainOut := scrape(t, plain)
	keyedOut := scrape(t, keyed)
	if strings.Contains(plainOut, "job:invoice-generation") {
		t.Errorf("without WithKeyLabel the key appears:\n%s", plainOut)
	}
	for _, want := range []string{
		`lease_acquired_total{app="billing",key="job:invoice-generation"} 1`,
		`lease_released_total{app="billing",key="job:invoice-generation"} 1`,
		`lease_held{app="billing",key="job:invoice-generation"} 0`,
	} {
		if !strings.Contains(keyedOut, want) {
			t.Errorf("with WithKeyLabel, missing %q in:\n%s", want, keyedOut)
		}
	}
}

// scrape serves c over HTTP as an application would and returns the text.
func scrape(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestScrapeShowsEveryMetricFromTheStart(t *testing.T) {
	out := scrape(t, leaseprom.New())
	for _, name := range []string{
		"lease_acquired_total 0", `lease_lost_total{reason="deadline"} 0`, "lease_released_total 0",
		"lease_renewals_total 0", "lease_renew_failures_total 0", "lease_held 0",
		"lease_heartbeat_latency_seconds_count 0", "lease_acquire_wait_seconds_count 0",
		`lease_acquire_failed_total{reason="timeout"} 0`,
	} {
		if !strings.Contains(out, name) {
			t.Errorf("scrape lacks %q:\n%s", name, out)
		}
	}
}

// TestCollectorCountsFailedAcquisitions: each failed acquisition counts once
// under its reason; invalid input does not count.
func TestCollectorCountsFailedAcquisitions(t *testing.T) {
	c := leaseprom.New()
	mem := memlease.New()
	defer mem.Close()
	client, err := lease.New(mem.Handle(), lease.WithObserver(c), lease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	other, err := lease.New(mem.Handle(), lease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	if _, err := other.TryAcquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.TryAcquire(ctx, "k"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("TryAcquire of a held key = %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := client.Acquire(tctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with a timeout = %v", err)
	}
	// Fill k's queue (one waiter with the default cap of mem's would take
	// 1024): the next queued Acquire is refused at once.
	for i := range driver.DefaultMaxWaiters {
		r := driver.Request{Key: "k", Token: fmt.Sprint("waiter-", i), TTL: time.Minute, Queue: true}
		if _, err := mem.Acquire(ctx, r); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("queueing waiter %d: %v", i, err)
		}
	}
	if _, err := client.Acquire(ctx, "k"); !errors.Is(err, lease.ErrQueueFull) {
		t.Fatalf("Acquire with a full queue = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := client.Acquire(cctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled ctx = %v", err)
	}
	if _, err := client.TryAcquire(ctx, ""); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("TryAcquire of an empty key = %v", err)
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.TryAcquire(ctx, "k2"); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("TryAcquire after Close = %v", err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP lease_acquire_failed_total Acquisitions that failed, by reason (held, timeout, canceled, closed, queue_full, error).
# TYPE lease_acquire_failed_total counter
lease_acquire_failed_total{reason="canceled"} 1
lease_acquire_failed_total{reason="closed"} 1
lease_acquire_failed_total{reason="error"} 0
lease_acquire_failed_total{reason="held"} 1
lease_acquire_failed_total{reason="queue_full"} 1
lease_acquire_failed_total{reason="timeout"} 1
`), "lease_acquire_failed_total"); err != nil {
		t.Error(err)
	}
}

func TestCollectorBroken(t *testing.T) {
	c := leaseprom.New()
	store := memlease.New()
	holder, err := lease.New(store, lease.WithTTL(time.Second), lease.WithObserver(c))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	ops, err := lease.New(store.Handle(), lease.WithObserver(c))
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	ctx := context.Background()
	l, err := holder.TryAcquire(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.ForceRelease(ctx, "stuck"); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if got := testutil.ToFloat64(collectorFor(t, c, "lease_broken_total")); got != 1 {
		t.Errorf("lease_broken_total = %v, want 1", got)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if n, err := testutil.GatherAndCount(reg, "lease_lost_total"); err != nil || n != 5 {
		t.Errorf("lease_lost_total series: %d, %v; want 5", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "lease_lost_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == "broken" && m.GetCounter().GetValue() != 1 {
				t.Errorf("lease_lost_total{reason=broken} = %v, want 1", m.GetCounter().GetValue())
			}
		}
	}
}
