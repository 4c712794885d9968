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
