// Package leaseprom exports lease events as Prometheus metrics.
//
// A [Collector] is both a [prometheus.Collector] and a [lease.Observer]:
//
//	metrics := leaseprom.New()
//	prometheus.MustRegister(metrics)
//	client, err := lease.New(store, lease.WithObserver(metrics))
//
// Metrics (all prefixed "lease_"):
//
//	lease_acquired_total                   counter    leases acquired
//	lease_acquire_failed_total{reason}     counter    failed acquisitions (not invalid input); reason is
//	                                                  held, timeout, canceled, closed, queue_full or error
//	lease_released_total                   counter    leases released by their holder
//	lease_lost_total{reason}               counter    leases lost; reason is deadline, not_held or session
//	lease_renewals_total                   counter    successful heartbeat renewals
//	lease_renew_failures_total             counter    failed renewals (retried until the local deadline)
//	lease_heartbeat_latency_seconds        histogram  round trip of successful renewals
//	lease_acquire_wait_seconds             histogram  time from the start of Acquire to the acquisition
//	lease_held                             gauge      leases held now
//
// No metric has a key label unless [WithKeyLabel] adds one: use it only
// when the set of keys is small and bounded.
package leaseprom
