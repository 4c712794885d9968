package leaseotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leaseotel"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/memlease"
)

// fixture is an Observer over in-memory exporters, a memlease store and a
// Client observed by it.
type fixture struct {
	obs    *leaseotel.Observer
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mem    *memlease.Store
	c      *lease.Client
}

func newFixture(t *testing.T, opts ...leaseotel.Option) *fixture {
	t.Helper()
	f := &fixture{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(), mem: memlease.New()}
	f.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	obs, err := leaseotel.New(append([]leaseotel.Option{leaseotel.WithTracerProvider(f.tp), leaseotel.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.obs = obs
	f.c = f.client(t, lease.WithObserver(obs), lease.WithHolder("worker-1"), lease.WithTTL(300*time.Millisecond))
	t.Cleanup(func() { _ = f.mem.Close() })
	return f
}

// client returns another Client of f's store.
func (f *fixture) client(t *testing.T, opts ...lease.Option) *lease.Client {
	t.Helper()
	c, err := lease.New(f.mem.Handle(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ended waits for an ended span named name and returns it.
func (f *fixture) ended(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, s := range f.spans.Ended() {
			if s.Name() == name {
				return s
			}
		}
	}
	t.Fatalf("no %s span ended", name)
	return nil
}

// value returns the value of the int64 sum name with exactly attrs, or
// the count of the histogram name; ok is false if no such point exists.
func (f *fixture) value(t *testing.T, name string, attrs ...attribute.KeyValue) (v int64, ok bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	want := attribute.NewSet(attrs...)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if p.Attributes.Equals(&want) {
						return p.Value, true
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if p.Attributes.Equals(&want) {
						return int64(p.Count), true
					}
				}
			}
		}
	}
	return 0, false
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// TestSpansJoinTheCallersTrace: acquire (with its wait), hold and release
// are children of the caller's span, in order, with the lease's attributes
// and never its token.
func TestSpansJoinTheCallersTrace(t *testing.T) {
	f := newFixture(t)
	other := f.client(t)
	ctx, parent := f.tp.Tracer("test").Start(context.Background(), "request")
	first, err := other.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(100 * time.Millisecond); _ = first.Release(context.Background()) }()
	l, err := f.c.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	parent.End()

	acq, hold, rel := f.ended(t, "lease.acquire"), f.ended(t, "lease.hold"), f.ended(t, "lease.release")
	for _, s := range []sdktrace.ReadOnlySpan{acq, hold, rel} {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("%s: parent %v, want the caller's span %v", s.Name(), s.Parent().SpanID(), parent.SpanContext().SpanID())
		}
		if s.Status().Code != codes.Unset {
			t.Errorf("%s: status %v", s.Name(), s.Status())
		}
		if attr(s, "lease.key").AsString() != "job" || attr(s, "lease.holder").AsString() != "worker-1" ||
			attr(s, "lease.fence").AsInt64() != int64(l.Fence()) || attr(s, "lease.kind").AsString() != "exclusive" {
			t.Errorf("%s: attributes %v", s.Name(), s.Attributes())
		}
		for _, a := range s.Attributes() {
			if strings.Contains(a.Value.String(), l.Token()) {
				t.Errorf("%s: attribute %s shows the token", s.Name(), a.Key)
			}
		}
	}
	if d := acq.EndTime().Sub(acq.StartTime()); d < 90*time.Millisecond {
		t.Errorf("lease.acquire lasted %v, want the ~100 ms wait", d)
	}
	if hold.StartTime().Before(acq.EndTime()) || rel.StartTime().Before(hold.EndTime()) || rel.EndTime().Before(rel.StartTime()) {
		t.Errorf("acquire %v–%v, hold %v–%v, release %v–%v: want them one after another",
			acq.StartTime(), acq.EndTime(), hold.StartTime(), hold.EndTime(), rel.StartTime(), rel.EndTime())
	}
}

// TestKindAttribute: readers and semaphore slots say so.
func TestKindAttribute(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r, err := f.c.TryAcquireShared(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.c.TrySemaphore(ctx, "pool", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*lease.Lease{r, s} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, sp := range f.spans.Ended() {
		if sp.Name() != "lease.hold" {
			continue
		}
		key, kind := attr(sp, "lease.key").AsString(), attr(sp, "lease.kind").AsString()
		switch {
		case key == "report" && kind == "shared":
		case key == s.Key() && kind == "semaphore" && attr(sp, "lease.semaphore").AsString() == "pool":
		default:
			t.Errorf("hold span %s of kind %q, attributes %v", key, kind, sp.Attributes())
		}
	}
}

// TestBrokenHoldSpan: a lease broken by another Client's ForceRelease ends
// its hold span with an error that says so, and counts as broken.
func TestBrokenHoldSpan(t *testing.T) {
	f := newFixture(t)
	ops := f.client(t, lease.WithObserver(f.obs))
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.ForceRelease(ctx, "stuck"); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	hold := f.ended(t, "lease.hold")
	if st := hold.Status(); st.Code != codes.Error || !strings.Contains(st.Description, "broken") {
		t.Errorf("hold span status %+v, want an error saying the lease was broken", st)
	}
	if attr(hold, "lease.reason").AsString() != "broken" {
		t.Errorf("hold span attributes %v, want lease.reason broken", hold.Attributes())
	}
	if v, _ := f.value(t, "lease.lost", attribute.String("reason", "broken")); v != 1 {
		t.Errorf("lease.lost{reason=broken} = %d, want 1", v)
	}
	if v, _ := f.value(t, "lease.broken"); v != 1 {
		t.Errorf("lease.broken = %d, want 1", v)
	}
}

// TestLostHoldSpan: a lease the store lost behind the Client's back ends
// its hold span with the reason.
func TestLostHoldSpan(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.mem.Release(ctx, driver.Request{Key: "job", Token: l.Token()}); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	hold := f.ended(t, "lease.hold")
	if st := hold.Status(); st.Code != codes.Error || attr(hold, "lease.reason").AsString() != "not_held" {
		t.Errorf("hold span status %+v, attributes %v; want an error with lease.reason not_held", st, hold.Attributes())
	}
	if v, _ := f.value(t, "lease.lost", attribute.String("reason", "not_held")); v != 1 {
		t.Errorf("lease.lost{reason=not_held} = %d, want 1", v)
	}
	if v, _ := f.value(t, "lease.held"); v != 0 {
		t.Errorf("lease.held = %d, want 0", v)
	}
}

// TestRenewFailuresOnTheHoldSpan: failed renewals are events of the hold
// span, which the deadline loss then ends.
func TestRenewFailuresOnTheHoldSpan(t *testing.T) {
	f := newFixture(t)
	faulty := leasetest.Faulty(f.mem.Handle())
	c, err := lease.New(faulty, lease.WithObserver(f.obs), lease.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	faulty.FailRenewals(errors.New("network down"))
	<-l.Done()
	hold := f.ended(t, "lease.hold")
	if attr(hold, "lease.reason").AsString() != "deadline" || len(hold.Events()) == 0 ||
		hold.Events()[0].Name != "lease.renew_failed" || !strings.Contains(hold.Events()[0].Attributes[0].Value.String(), "network down") {
		t.Errorf("hold span: attributes %v, events %v; want lease.reason deadline after lease.renew_failed events", hold.Attributes(), hold.Events())
	}
	if v, _ := f.value(t, "lease.renew_failures"); v < 1 || v != int64(len(hold.Events())) {
		t.Errorf("lease.renew_failures = %d, want one per event of the hold span (%d)", v, len(hold.Events()))
	}
}

// TestMetrics: the counters and histograms of a short story, every series
// there from the start, no key unless asked for.
func TestMetrics(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"lease.acquired", "lease.released", "lease.held", "lease.renewals"} {
		if v, ok := f.value(t, name); !ok || v != 0 {
			t.Errorf("before any lease: %s = %d (present: %v), want 0", name, v, ok)
		}
	}
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client(t).TryAcquire(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.TryAcquire(ctx, "busy"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("TryAcquire of a held key = %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := f.c.Acquire(tctx, "busy"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with a timeout = %v", err)
	}
	if v, _ := f.value(t, "lease.held"); v != 1 {
		t.Errorf("lease.held = %d while holding, want 1", v)
	}
	time.Sleep(350 * time.Millisecond) // a few renewals (TTL 300 ms)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		attrs []attribute.KeyValue
		want  int64
	}{
		{"lease.acquired", nil, 1},
		{"lease.released", nil, 1},
		{"lease.held", nil, 0},
		{"lease.acquire.wait", nil, 1},
		{"lease.acquire_failed", []attribute.KeyValue{attribute.String("reason", "held")}, 1},
		{"lease.acquire_failed", []attribute.KeyValue{attribute.String("reason", "timeout")}, 1},
		{"lease.acquire_failed", []attribute.KeyValue{attribute.String("reason", "closed")}, 0},
		{"lease.lost", []attribute.KeyValue{attribute.String("reason", "deadline")}, 0},
	} {
		if v, ok := f.value(t, c.name, c.attrs...); !ok || v != c.want {
			t.Errorf("%s%v = %d (present: %v), want %d", c.name, c.attrs, v, ok, c.want)
		}
	}
	for _, name := range []string{"lease.renewals", "lease.heartbeat.latency"} {
		if v, _ := f.value(t, name); v < 2 {
			t.Errorf("%s = %d, want ≥ 2", name, v)
		}
	}
}

func TestKeyAttributeIsOptIn(t *testing.T) {
	f := newFixture(t, leaseotel.WithKeyAttribute())
	ctx := context.Background()
	l, err := f.c.TryAcquire(ctx, "job:invoice")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	key := attribute.String("lease.key", "job:invoice")
	if v, _ := f.value(t, "lease.acquired", key); v != 1 {
		t.Errorf("with WithKeyAttribute: lease.acquired{lease.key=job:invoice} = %d, want 1", v)
	}
	if _, ok := f.value(t, "lease.acquired"); ok {
		t.Error("with WithKeyAttribute, lease.acquired has a series without the key")
	}
	plain := newFixture(t)
	if _, err := plain.c.TryAcquire(ctx, "job:invoice"); err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.value(t, "lease.acquired", key); ok {
		t.Error("without WithKeyAttribute, lease.acquired has the key")
	}
	if v, _ := plain.value(t, "lease.acquired"); v != 1 {
		t.Errorf("lease.acquired = %d, want 1", v)
	}
}
