// Smoke test of the benchmark harness: every scenario, briefly, on the
// in-memory and file stores (no servers), and the report it writes.

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary act as the benchmark's worker processes:
// the fail-over and heartbeat scenarios re-execute os.Executable().
func TestMain(m *testing.M) {
	if slices.Contains(os.Args, "-failover-child") || slices.Contains(os.Args, "-heartbeat-child") {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestSmoke runs every scenario for a fraction of a second on the in-memory
// and file stores (no servers needed) and checks the outputs.
func TestSmoke(t *testing.T) {
	if !testing.Short() {
		t.Skip("smoke test: run with -short (the real benchmark is `go run .`)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plan := Plan{
		Scenarios: []string{"cycle", "contention", "read-heavy", "acquire-all", "failover", "heartbeat", "many-keys", "held-100k"},
		Systems:   []string{"leasekit/file"},
		CycleDur:  200 * time.Millisecond, ContDur: 300 * time.Millisecond, Workers: 4, Hold: time.Millisecond,
		Trials: 1, HBLeases: 20, HBDur: 2 * time.Second, IncludeMemory: true,
		MKWorkers: 4, MKKeys: 40, MKDur: 300 * time.Millisecond, HKLeases: 30, HKDur: 2 * time.Second,
	}
	env := &Env{FileDir: t.TempDir(), Run: "smoke"}
	rs, notes := Execute(ctx, env, plan, t.Logf)
	for _, n := range notes {
		t.Log(n)
	}
	want := map[string]bool{
		"cycle/file": false, "cycle/memory": false, "contention/file": false, "contention/memory": false,
		"failover/file": false, "heartbeat/file": false, "heartbeat/memory": false,
		"read-heavy/memory": false, "read-heavy/file": false, "acquire-all/memory": false, "acquire-all/file": false,
		"many-keys/file": false, "many-keys/memory": false, "held-100k/file": false, "held-100k/memory": false,
	}
	for _, r := range rs {
		k := r.Scenario + "/" + r.Store
		if r.Skipped == errNoShared.Error() && r.Store != "memory" {
			t.Logf("%s %s: %s", k, r.System, r.Skipped) // a store without shared leases yet
			continue
		}
		if r.Skipped != "" {
			t.Errorf("%s skipped: %s", k, r.Skipped)
			continue
		}
		want[k] = true
		switch r.Scenario {
		case "cycle":
			if r.OpsPerS <= 0 || r.P50Ms == nil {
				t.Errorf("%s: no cycles measured: %+v", k, r)
			}
		case "contention":
			if r.Samples == 0 || r.PerWorkerMax == nil || r.WaitMaxMs == nil {
				t.Errorf("%s: nothing acquired: %+v", k, r)
			}
		case "read-heavy", "acquire-all":
			// A slow store's writer may complete its waits only after the
			// short window (no Samples): every attempt must still end.
			if (r.Samples == 0 && r.Role != "writer") || r.WaitMaxMs == nil || counterF(&r, "timeouts") != 0 || r.Errors != 0 {
				t.Errorf("%s %s %s: nothing acquired or timeouts: %+v", k, r.System, r.Role, r)
			}
			if r.Scenario == "read-heavy" && counterF(&r, "overlaps") != 0 {
				t.Errorf("%s %s: a writer held the key beside another holder: %+v", k, r.System, r)
			}
			if r.Scenario == "read-heavy" && r.System == "leasekit" && r.Role == "reader" && counterF(&r, "max_readers_together") < 2 {
				t.Logf("%s: readers never held the key together (%v)", k, r.Counters["max_readers_together"])
			}
		case "failover":
			// The next holder cannot come a TTL after the crashed holder's
			// Lock call or sooner (it never released; its lease was written
			// after that call). From its Lock's return, the report's
			// fail-over, it may: by the time the holder took to return.
			if r.P50Ms == nil {
				t.Errorf("%s: no fail-over measured: %+v", k, r)
			} else if c := counterF(&r, "from_lock_call_min_ms"); c < ms(failoverTTL) {
				t.Errorf("%s: the next holder came %.2f ms after the holder's Lock call, want ≥ the TTL (%v)", k, c, failoverTTL)
			}
		case "many-keys":
			if r.Samples == 0 || r.OpsPerS <= 0 || r.P99Ms == nil || r.Errors != 0 {
				t.Errorf("%s: no operations or errors: %+v", k, r)
			}
		case "held-100k":
			if r.Leases != plan.HKLeases || r.RoundTripsPerInterval == nil || r.BytesPerLease == nil || r.P99Ms == nil {
				t.Errorf("%s: incomplete: %+v", k, r)
			}
		case "heartbeat":
			if r.Leases != plan.HBLeases || r.RoundTripsPerInterval == nil || r.BytesPerLease == nil || r.CPUPercent == nil {
				t.Errorf("%s: incomplete: %+v", k, r)
			}
		}
	}
	for k, ok := range want {
		if !ok {
			t.Errorf("no result for %s", k)
		}
	}
	dir := t.TempDir()
	if err := writeJSON(filepath.Join(dir, "results.json"), rs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(b, &back); err != nil || len(back) != len(rs) {
		t.Fatalf("results.json: %v, %d records", err, len(back))
	}
	if err := writeReport(dir, rs, notes, runMeta(time.Now(), true, plan)); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## Targets", "## 1. Uncontended", "## 3. Crash fail-over", "| file |", "## 6. Read-heavy", "| leasekit | memory |", "## 7. All or nothing", "0 timeouts", "## 8. Many keys", "## 9. 100,000 held leases"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("BENCHMARKS.md lacks %q", s)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bench", "cycle.png")); err != nil {
		t.Errorf("cycle plot: %v", err)
	}
}
