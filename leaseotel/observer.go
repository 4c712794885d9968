// The Observer: its options, its instruments and the metrics it records.

package leaseotel

import (
	"context"
	"errors"
	"math"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/reason"
)

var _ lease.Observer = (*Observer)(nil)

// scope names the meter and the tracer.
const scope = "github.com/leasekit/lease/leaseotel"

// Observer turns lease events into OpenTelemetry metrics and spans. Pass it
// to lease.WithObserver; one Observer may observe any number of Clients. It
// is safe for concurrent use.
type Observer struct {
	keyAttr bool
	tracer  trace.Tracer

	acquired  metric.Int64Counter
	acqFailed metric.Int64Counter
	released  metric.Int64Counter
	lost      metric.Int64Counter
	broken    metric.Int64Counter
	renewals  metric.Int64Counter
	failures  metric.Int64Counter
	heartbeat metric.Float64Histogram
	wait      metric.Float64Histogram
	held      metric.Int64UpDownCounter

	mu    sync.Mutex
	holds map[hold][]trace.Span // the open lease.hold spans
}

type config struct {
	mp      metric.MeterProvider
	tp      trace.TracerProvider
	keyAttr bool
}

// Option configures an Observer.
type Option func(*config)

// WithMeterProvider sets where the metrics go (default otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets where the spans go (default otel.GetTracerProvider()).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithKeyAttribute adds the lease key as the attribute lease.key to every
// metric. Each distinct key then makes its own series: opt in only for a
// small, bounded set of keys. Spans always carry the key.
func WithKeyAttribute() Option { return func(c *config) { c.keyAttr = true } }

// New returns an Observer; the error is the meter's, if it refused an
// instrument.
func New(opts ...Option) (*Observer, error) {
	var cfg config
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	m := cfg.mp.Meter(scope)
	o := &Observer{keyAttr: cfg.keyAttr, tracer: cfg.tp.Tracer(scope), holds: map[hold][]trace.Span{}}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string, bounds []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return h
	}
	o.acquired = counter("lease.acquired", "{lease}", "Leases acquired.")
	o.acqFailed = counter("lease.acquire_failed", "{acquisition}",
		"Acquisitions that failed, by reason (held, timeout, canceled, closed, queue_full, error).")
	o.released = counter("lease.released", "{lease}", "Leases released by their holder.")
	o.lost = counter("lease.lost", "{lease}", "Leases lost while held, by reason (deadline, not_held, session, max_hold, broken).")
	o.broken = counter("lease.broken", "{lease}", "Leases this process broke (Client.ForceRelease), one per evicted hold.")
	o.renewals = counter("lease.renewals", "{renewal}", "Successful heartbeat renewals.")
	o.failures = counter("lease.renew_failures", "{renewal}", "Failed heartbeat renewals (retried until the local deadline).")
	o.heartbeat = histogram("lease.heartbeat.latency", "Round trip of successful heartbeat renewals.", buckets(0.0005, 2, 14))
	o.wait = histogram("lease.acquire.wait", "Time from the start of an acquisition to getting the lease.", buckets(0.001, 3, 13))
	var err error
	o.held, err = m.Int64UpDownCounter("lease.held", metric.WithUnit("{lease}"), metric.WithDescription("Leases held now."))
	if err = errors.Join(append(errs, err)...); err != nil {
		return nil, err
	}
	if !o.keyAttr { // every series is known: export them at 0 from the start
		ctx := context.Background()
		for _, c := range []metric.Int64Counter{o.acquired, o.released, o.broken, o.renewals, o.failures} {
			c.Add(ctx, 0)
		}
		o.held.Add(ctx, 0)
		for _, r := range []lease.LossReason{lease.LossDeadline, lease.LossNotHeld, lease.LossSession, lease.LossMaxHold, lease.LossBroken} {
			o.lost.Add(ctx, 0, metric.WithAttributes(attribute.String("reason", string(r))))
		}
		for _, r := range reason.Failures {
			o.acqFailed.Add(ctx, 0, metric.WithAttributes(attribute.String("reason", r)))
		}
	}
	return o, nil
}

// buckets returns n bucket boundaries from start, each factor times the last.
func buckets(start, factor float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start * math.Pow(factor, float64(i))
	}
	return b
}

// Observe implements lease.Observer: it records e's metrics and spans. It
// never blocks.
func (o *Observer) Observe(e lease.Event) {
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	var attrs []attribute.KeyValue
	if o.keyAttr {
		attrs = []attribute.KeyValue{attribute.String("lease.key", e.Key)}
	}
	with := func(extra ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributes(append(attrs[:len(attrs):len(attrs)], extra...)...)
	}
	switch e.Kind {
	case lease.EventAcquired:
		o.acquired.Add(ctx, 1, with())
		o.wait.Record(ctx, e.Wait.Seconds(), with())
		o.held.Add(ctx, 1, with())
	case lease.EventRenewed:
		o.renewals.Add(ctx, 1, with())
		o.heartbeat.Record(ctx, e.Latency.Seconds(), with())
	case lease.EventRenewFailed:
		o.failures.Add(ctx, 1, with())
	case lease.EventLost:
		o.lost.Add(ctx, 1, with(attribute.String("reason", string(e.Reason))))
		o.held.Add(ctx, -1, with())
	case lease.EventReleased:
		o.released.Add(ctx, 1, with())
		o.held.Add(ctx, -1, with())
	case lease.EventBroken:
		o.broken.Add(ctx, 1, with())
	case lease.EventAcquireFailed:
		o.acqFailed.Add(ctx, 1, with(attribute.String("reason", reason.Failure(e.Err))))
	}
	o.trace(ctx, e)
}
