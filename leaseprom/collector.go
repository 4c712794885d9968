// The Collector: the metric vectors and the Observer that feeds them.

package leaseprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/reason"
)

var (
	_ prometheus.Collector = (*Collector)(nil)
	_ lease.Observer       = (*Collector)(nil)
)

// DefaultHeartbeatBuckets are the buckets of lease_heartbeat_latency_seconds:
// 0.5 ms to about 4 s.
var DefaultHeartbeatBuckets = prometheus.ExponentialBuckets(0.0005, 2, 14)

// DefaultWaitBuckets are the buckets of lease_acquire_wait_seconds: 1 ms to
// about 9 minutes.
var DefaultWaitBuckets = prometheus.ExponentialBuckets(0.001, 3, 13)

// Collector turns lease events into Prometheus metrics. Register it with a
// prometheus.Registerer and pass it to lease.WithObserver; one Collector may
// observe any number of Clients. It is safe for concurrent use.
type Collector struct {
	keyLabel bool

	acquired  *prometheus.CounterVec
	acqFailed *prometheus.CounterVec
	released  *prometheus.CounterVec
	lost      *prometheus.CounterVec
	broken    *prometheus.CounterVec
	renewals  *prometheus.CounterVec
	failures  *prometheus.CounterVec
	heartbeat *prometheus.HistogramVec
	wait      *prometheus.HistogramVec
	held      *prometheus.GaugeVec
}

type config struct {
	keyLabel         bool
	constLabels      prometheus.Labels
	heartbeatBuckets []float64
	waitBuckets      []float64
}

// Option configures a Collector.
type Option func(*config)

// WithKeyLabel adds the lease key as a "key" label to every metric. Each
// distinct key then makes its own series: opt in only for a small, bounded
// set of keys.
func WithKeyLabel() Option { return func(c *config) { c.keyLabel = true } }

// WithConstLabels adds fixed labels to every metric (for example the store
// or the application).
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) { c.constLabels = l }
}

// WithHeartbeatBuckets sets the buckets of lease_heartbeat_latency_seconds
// (default DefaultHeartbeatBuckets).
func WithHeartbeatBuckets(b []float64) Option {
	return func(c *config) { c.heartbeatBuckets = b }
}

// WithWaitBuckets sets the buckets of lease_acquire_wait_seconds (default
// DefaultWaitBuckets).
func WithWaitBuckets(b []float64) Option { return func(c *config) { c.waitBuckets = b } }

// New returns a Collector.
func New(opts ...Option) *Collector {
	cfg := config{heartbeatBuckets: DefaultHeartbeatBuckets, waitBuckets: DefaultWaitBuckets}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	var labels []string
	if cfg.keyLabel {
		labels = []string{"key"}
	}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: name, Help: help, ConstLabels: cfg.constLabels,
		}, append(append([]string(nil), labels...), extra...))
	}
	histogram := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: name, Help: help, ConstLabels: cfg.constLabels, Buckets: buckets,
		}, labels)
	}
	c := &Collector{
		keyLabel: cfg.keyLabel,
		acquired: counter("lease_acquired_total", "Leases acquired."),
		acqFailed: counter("lease_acquire_failed_total",
			"Acquisitions that failed, by reason (held, timeout, canceled, closed, queue_full, error).", "reason"),
		released: counter("lease_released_total", "Leases released by their holder."),
		lost: counter("lease_lost_total",
			"Leases lost while held, by reason (deadline, not_held, session, max_hold, broken).", "reason"),
		broken:   counter("lease_broken_total", "Leases this process broke (Client.ForceRelease), one per evicted hold."),
		renewals: counter("lease_renewals_total", "Successful heartbeat renewals."),
		failures: counter("lease_renew_failures_total", "Failed heartbeat renewals (retried until the local deadline)."),
		heartbeat: histogram("lease_heartbeat_latency_seconds",
			"Round trip of successful heartbeat renewals, in seconds.", cfg.heartbeatBuckets),
		wait: histogram("lease_acquire_wait_seconds",
			"Time from the start of an acquisition to getting the lease, in seconds.", cfg.waitBuckets),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lease_held", Help: "Leases held now.", ConstLabels: cfg.constLabels,
		}, labels),
	}
	if !cfg.keyLabel {
		// Without the key label every series is known: export them at 0 from the start.
		c.acquired.WithLabelValues()
		c.released.WithLabelValues()
		c.broken.WithLabelValues()
		c.renewals.WithLabelValues()
		c.failures.WithLabelValues()
		c.heartbeat.WithLabelValues()
		c.wait.WithLabelValues()
		c.held.WithLabelValues()
		for _, r := range []lease.LossReason{lease.LossDeadline, lease.LossNotHeld, lease.LossSession, lease.LossMaxHold, lease.LossBroken} {
			c.lost.WithLabelValues(string(r))
		}
		for _, r := range reason.Failures {
			c.acqFailed.WithLabelValues(r)
		}
	}
	return c
}

func (c *Collector) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.acquired, c.acqFailed, c.released, c.lost, c.broken, c.renewals, c.failures, c.heartbeat, c.wait, c.held}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.collectors() {
		m.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.collectors() {
		m.Collect(ch)
	}
}

// Observe implements lease.Observer: it updates the metrics for e. It never
// blocks.
func (c *Collector) Observe(e lease.Event) {
	var lv []string
	if c.keyLabel {
		lv = []string{e.Key}
	}
	switch e.Kind {
	case lease.EventAcquired:
		c.acquired.WithLabelValues(lv...).Inc()
		c.wait.WithLabelValues(lv...).Observe(e.Wait.Seconds())
		c.held.WithLabelValues(lv...).Inc()
	case lease.EventRenewed:
		c.renewals.WithLabelValues(lv...).Inc()
		c.heartbeat.WithLabelValues(lv...).Observe(e.Latency.Seconds())
	case lease.EventRenewFailed:
		c.failures.WithLabelValues(lv...).Inc()
	case lease.EventLost:
		c.lost.WithLabelValues(append(lv, string(e.Reason))...).Inc()
		c.held.WithLabelValues(lv...).Dec()
	case lease.EventReleased:
		c.released.WithLabelValues(lv...).Inc()
		c.held.WithLabelValues(lv...).Dec()
	case lease.EventBroken:
		c.broken.WithLabelValues(lv...).Inc()
	case lease.EventAcquireFailed:
		c.acqFailed.WithLabelValues(append(lv, reason.Failure(e.Err))...).Inc()
	}
}
