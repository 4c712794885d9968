// Tests of the report's explanations of missed targets, on made-up results.

package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestMissedWaitMaxNamesTheStall(t *testing.T) {
	r := Result{Scenario: "contention", System: "leasekit", Store: "etcd", Clients: 16, Samples: 4000,
		HandoffOtherP50Ms: f64(1.0), HandoffOtherP99Ms: f64(4.0), WaitP99Ms: f64(45),
		Counters: map[string]any{"hold_mean_ms": 1.5, "handoff_other_max_ms": 41.0}}
	var out strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&out, format, a...) }
	no := false
	missedWhy(w, index{r}, []verdict{{target: "(2) wait max ≤ 2× FIFO ideal (N−1)×(hold+hand-off p50)", store: "etcd", met: &no}})
	got := out.String()
	// Ideal: 15 × (1.5 + 1.0) = 37.5 ms; p99 45 ms = 1.20× it.
	for _, want := range []string{"wait max on etcd", "of 4000", "the longest hand-off of this run took 41.0 ms, against a p99 of 4.00 ms", "p99 was 1.20× the ideal"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

func TestRotated(t *testing.T) {
	xs := []int{1, 2, 3}
	for round, want := range [][]int{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 2, 3}} {
		if got := rotated(xs, round); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("round %d: %v, want %v", round, got, want)
		}
	}
	if fmt.Sprint(xs) != "[1 2 3]" {
		t.Errorf("rotated changed its input: %v", xs)
	}
	if got := rotated([]int(nil), 5); len(got) != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestFenceLadderInOrderAgainstRaw(t *testing.T) {
	cyc := func(sys string, ops, us, n float64) Result {
		return Result{Scenario: "cycle", System: sys, Store: "redis", OpsPerS: ops,
			Counters: map[string]any{"p10_ms": 0.02, "redis_command_us_per_op": us, "redis_commands_per_op": n}}
	}
	// Out of report order, one step missing (raw-fenced-multi): the table
	// keeps the ladder's order and leaves the missing step out.
	x := index{cyc("leasekit", 800, 11.5, 10), cyc("raw-fenced-pipe", 1000, 4.2, 5), cyc("raw", 1000, 3.5, 4), cyc("raw-fenced", 900, 6.4, 6)}
	var out strings.Builder
	fenceLadder(func(format string, a ...any) { fmt.Fprintf(&out, format, a...) }, x)
	got := out.String()
	var rows []string
	for _, line := range strings.Split(got, "\n") {
		if f := strings.Split(line, " | "); len(f) > 3 && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| system") {
			rows = append(rows, strings.TrimPrefix(f[0], "| ")+" "+f[3])
		}
	}
	want := []string{"raw 1.00×", "raw-fenced-pipe 1.00×", "raw-fenced 0.90×", "leasekit 0.80×"}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("rows %q, want %q in:\n%s", rows, want, got)
	}
	if !strings.Contains(got, "| 11.5 | 10.0 |") {
		t.Errorf("leasekit's server time and commands missing:\n%s", got)
	}
	out.Reset()
	fenceLadder(func(format string, a ...any) { fmt.Fprintf(&out, format, a...) }, index{cyc("leasekit", 800, 11.5, 10)})
	if out.Len() != 0 {
		t.Errorf("without raw the ladder has no base, but wrote:\n%s", out.String())
	}
}

func TestPeersVsIssueRangesAndSettings(t *testing.T) {
	x := index{
		{Scenario: "cycle", System: "redislock-noretry", Store: "redis", OpsPerS: 8400},
		{Scenario: "cycle", System: "redislock-exp", Store: "redis", OpsPerS: 8800},
		{Scenario: "contention", System: "zk-lock", Store: "zookeeper", OpsPerS: 400, HandoffOtherP50Ms: f64(1.2)},
	}
	var out strings.Builder
	peersVsIssue(func(format string, a ...any) { fmt.Fprintf(&out, format, a...) }, x, Meta{EtcdFsync: "yes", ZKForceSync: "no"})
	got := out.String()
	for _, want := range []string{
		"| uncontended cycles/s | redislock-noretry, redislock-linear, redislock-exp | redis | ~8,000–10,000 | 8400–8800/s |  |",
		"| 16 workers: hand-off p50 | zk-lock | zookeeper | ~2–3 ms | 1.20 ms | fsync |",
		"| uncontended cycles/s | zk-lock | zookeeper | ~430 | – | fsync |", // not measured: a dash, not zero
		"ZooKeeper **forceSync off**", // the run's setting is stated where it matters
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	out.Reset()
	peersVsIssue(func(format string, a ...any) { fmt.Fprintf(&out, format, a...) }, x, Meta{EtcdFsync: "yes", ZKForceSync: "yes"})
	if !strings.Contains(out.String(), "both stores fsynced every write in this run") {
		t.Errorf("a durable run is not said to be one:\n%s", out.String())
	}
}

func TestReadHeavySectionComparesWithBaseline(t *testing.T) {
	rec := func(sys, store, role string, ops float64) Result {
		return Result{Scenario: "read-heavy", System: sys, Store: store, Role: role, OpsPerS: ops, WaitP50Ms: f64(1), WaitP99Ms: f64(2), WaitMaxMs: f64(3),
			Counters: map[string]any{"max_readers_together": 16, "overlaps": 0, "timeouts": 0}}
	}
	rs := []Result{
		rec("leasekit", "redis", "reader", 2000), rec("leasekit", "redis", "writer", 100),
		rec("leasekit-exclusive", "redis", "reader", 400), rec("leasekit-exclusive", "redis", "writer", 50),
		rec("leasekit", "etcd", "reader", 300), rec("leasekit", "etcd", "writer", 30),
		rec("etcd-rwmutex", "etcd", "reader", 100), rec("etcd-rwmutex", "etcd", "writer", 15),
		{Scenario: "read-heavy", System: "leasekit", Store: "zookeeper", Skipped: errNoShared.Error()},
	}
	var out strings.Builder
	readHeavySection(func(format string, a ...any) { fmt.Fprintf(&out, format, a...) }, rs, index(rs), Meta{Plan: quickPlan()})
	got := out.String()
	for _, want := range []string{"| leasekit | redis | 2000 |", "5.00× (vs leasekit-exclusive) | 2.00× |", "3.00× (vs etcd-rwmutex) | 2.00× |", "leasekit/zookeeper: store has no shared leases"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestManyKeysVerdicts checks issue #26's target rows against made-up
// results: each ratio on the right side of its bound.
func TestManyKeysVerdicts(t *testing.T) {
	mk := func(sys, store string, ops, p99, cpu float64) Result {
		return Result{Scenario: "many-keys", System: sys, Store: store, OpsPerS: ops, P99Ms: f64(p99), ServerCPUUsPerOp: f64(cpu), RequestsPerOp: f64(1)}
	}
	held := func(store string, rt, bytes float64, lost int) Result {
		return Result{Scenario: "held-100k", System: "leasekit", Store: store, Leases: 100000, RoundTripsPerInterval: f64(rt), BytesPerLease: f64(bytes),
			Counters: map[string]any{"lost_total": float64(lost)}}
	}
	x := index{
		mk("leasekit", "redis", 3000, 10, 20), mk("redislock", "redis", 1000, 10, 40.1), // 3×, 0.499×, p99 equal: met
		mk("leasekit", "etcd", 2999, 5, 0), mk("etcd-mutex", "etcd", 1000, 5, 0), // just under 3×: missed
		mk("leasekit", "zookeeper", 900, 5, 0), mk("zk-lock", "zookeeper", 300, 5, 0), // 3×: met
		held("redis", 1.0, 1023, 0), held("postgres-table", 1.0, 1024, 0), held("etcd", 1.0, 600, 3),
	}
	got := map[string]bool{}
	for _, vd := range manyKeysVerdicts(x) {
		if vd.met == nil {
			t.Errorf("%s %s: not measured", vd.target, vd.store)
			continue
		}
		got[vd.target+"/"+vd.store] = *vd.met
	}
	want := map[string]bool{
		"(8) many keys: ops/s ≥ 3× redislock/redis":                                         true,
		"(8) many keys: server CPU per op ≤ 0.5× redislock/redis":                           true,
		"(8) many keys: p99 ≤ redislock/redis":                                              true,
		"(8) many keys: ops/s ≥ 3× etcd-mutex/etcd":                                         false,
		"(8) many keys: ops/s ≥ 3× zk-lock/zookeeper":                                       true,
		"(9) held: 1.00 round trip per renew interval (100000 leases)/redis":                true,
		"(9) held: < 1 KiB memory (heap + stacks) per lease (100000 leases)/redis":          true,
		"(9) held: 1.00 round trip per renew interval (100000 leases)/postgres-table":       true,
		"(9) held: < 1 KiB memory (heap + stacks) per lease (100000 leases)/postgres-table": false,
		"(9) held: 1.00 round trip per renew interval (100000 leases)/etcd":                 false, // leases lost
		"(9) held: < 1 KiB memory (heap + stacks) per lease (100000 leases)/etcd":           true,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: met %v (present %v), want %v", k, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d verdicts, want %d: %v", len(got), len(want), got)
	}
}
