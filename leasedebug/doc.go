// Package leasedebug serves a page of what this process's lease Clients
// hold and wait for, in the spirit of net/http/pprof: mount it on a debug
// port or behind authentication, never on a public one.
//
//	mux.Handle("/debug/leases", leasedebug.Handler(client))
//
// The page lists each Client's leases (key, kind, holder, fence, time held,
// last renewal and its latency, time left before the local deadline), its
// waiting acquisitions (and who held the key at the last refusal) and its
// last 100 events but renewals, from [lease.Client.Snapshot]. It is
// rendered on the server, runs no script, and reloads itself every 5
// seconds (?refresh=N seconds, 0 for never); ?format=json returns the same
// data as JSON. Tokens never appear: leases and queued waiters show the
// 8-hex-digit ID that Client.List shows.
package leasedebug
