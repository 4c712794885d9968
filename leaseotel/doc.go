// Package leaseotel reports lease events as OpenTelemetry metrics and
// spans, the metrics of package leaseprom through the OpenTelemetry API.
//
// An [Observer] is a [lease.Observer]:
//
//	obs, err := leaseotel.New() // the global meter and tracer providers
//	client, err := lease.New(store, lease.WithObserver(obs))
//
// Metrics (the usual translation to Prometheus names, dots to underscores
// plus unit and _total suffixes, gives leaseprom's: lease.acquired becomes
// lease_acquired_total):
//
//	lease.acquired                  counter         leases acquired
//	lease.acquire_failed{reason}    counter         failed acquisitions (not invalid input); reason is
//	                                                held, timeout, canceled, closed, queue_full or error
//	lease.released                  counter         leases released by their holder
//	lease.lost{reason}              counter         leases lost; reason is deadline, not_held, session,
//	                                                max_hold or broken
//	lease.broken                    counter         leases this process broke (Client.ForceRelease)
//	lease.renewals                  counter         successful heartbeat renewals
//	lease.renew_failures            counter         failed renewals (retried until the local deadline)
//	lease.heartbeat.latency         histogram (s)   round trip of successful renewals
//	lease.acquire.wait              histogram (s)   time from the start of Acquire to the acquisition
//	lease.held                      updowncounter   leases held now
//
// No metric has the key unless [WithKeyAttribute] adds it as lease.key: use
// it only when the set of keys is small and bounded.
//
// Spans join the trace of the ctx passed to Acquire and Release:
//
//	lease.acquire   from the start of the acquisition to the grant, the wait included;
//	                an error status (and lease.reason) if it failed
//	lease.hold      from the grant to Release or the loss; a loss sets an error status
//	                and lease.reason (a broken lease: "broken"), a failed renewal is
//	                a lease.renew_failed event
//	lease.release   the Release call; an error status if the store refused it
//
// Their attributes are lease.key, lease.holder, lease.fence, lease.kind
// (exclusive, shared or semaphore) and lease.semaphore for a semaphore's
// slot; never the token, which would let its reader renew or release the
// lease.
package leaseotel
