// Result records (one per scenario, system and store: results.json) and
// latency statistics.

package main

import (
	"slices"
	"time"
)

// Result is one record of results.json. Fields that do not apply to a
// scenario are omitted; p50/p99/max are the scenario's main latency (the
// cycle for "cycle", the fail-over time for "failover", the acquire wait for
// "pg-contention").
type Result struct {
	Scenario string `json:"scenario"`
	System   string `json:"system"`
	Store    string `json:"store"`
	// Role is "reader" or "writer" in the read-heavy scenario (one record
	// each), else empty; Clients then counts that role's workers.
	Role    string `json:"role,omitempty"`
	Clients int    `json:"clients"`

	OpsPerS float64  `json:"ops_per_s,omitempty"`
	P50Ms   *float64 `json:"p50_ms,omitempty"`
	P99Ms   *float64 `json:"p99_ms,omitempty"`
	MaxMs   *float64 `json:"max_ms,omitempty"`

	HandoffOtherP50Ms *float64 `json:"handoff_other_p50_ms,omitempty"`
	HandoffOtherP99Ms *float64 `json:"handoff_other_p99_ms,omitempty"`
	RetakePct         *float64 `json:"retake_pct,omitempty"`
	WaitP50Ms         *float64 `json:"wait_p50_ms,omitempty"`
	WaitP99Ms         *float64 `json:"wait_p99_ms,omitempty"`
	WaitMaxMs         *float64 `json:"wait_max_ms,omitempty"`
	PerWorkerMin      *int     `json:"per_worker_min,omitempty"`
	PerWorkerMax      *int     `json:"per_worker_max,omitempty"`

	RoundTripsPerInterval *float64 `json:"round_trips_per_interval,omitempty"`
	BytesPerLease         *float64 `json:"bytes_per_lease,omitempty"`
	CPUPercent            *float64 `json:"cpu_percent,omitempty"`

	// RequestsPerOp is the client's requests on the wire (a pipeline once)
	// per operation, ServerCPUUsPerOp the server's CPU time per operation
	// in µs (many-keys: where the server's process can be read).
	RequestsPerOp    *float64 `json:"requests_per_op,omitempty"`
	ServerCPUUsPerOp *float64 `json:"server_cpu_us_per_op,omitempty"`

	// Extra detail (not in the schema; scripts may ignore it).
	Samples    int            `json:"samples,omitempty"`
	Errors     int            `json:"errors,omitempty"`
	TTLMs      float64        `json:"ttl_ms,omitempty"`
	HoldMs     float64        `json:"hold_ms,omitempty"`
	PerWorker  []int          `json:"per_worker,omitempty"`
	TrialsMs   []float64      `json:"trials_ms,omitempty"`
	Counters   map[string]any `json:"counters,omitempty"`
	Note       string         `json:"note,omitempty"`
	Skipped    string         `json:"skipped,omitempty"`
	DurationS  float64        `json:"duration_s,omitempty"`
	Leases     int            `json:"leases,omitempty"`
	IntervalMs float64        `json:"renew_interval_ms,omitempty"`
}

func f64(v float64) *float64 { return &v }
func iptr(v int) *int        { return &v }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct returns the p-th percentile (nearest rank) of sorted ds, in ms.
func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	i = min(max(i, 0), len(sorted)-1)
	return ms(sorted[i])
}

// summary sorts ds and returns p50, p99 and max in ms (nil if empty).
func summary(ds []time.Duration) (p50, p99, mx *float64) {
	if len(ds) == 0 {
		return nil, nil, nil
	}
	slices.Sort(ds)
	return f64(pct(ds, 50)), f64(pct(ds, 99)), f64(ms(ds[len(ds)-1]))
}
