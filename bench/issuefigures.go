// The peers' figures from issue #7's first measurement, set beside the same
// figures of this run, so that a reader sees whether the harness reproduces
// them and, where it does not, which setting differs.

package main

import (
	"fmt"
	"strings"
)

// issueFigure is one figure the issue quotes for one or more peers: what the
// issue saw (text, as the issue gives it), and how to read it off a result.
type issueFigure struct {
	scenario string
	systems  []string // the peers the issue's figure covers, on store
	store    string
	what     string
	issue    string
	value    func(r *Result) (float64, bool)
	unit     string
	differs  string // which setting of this harness differs, if one does
}

// The figures issueFigures read: a result's value, and whether it has one.
var (
	ops        = func(r *Result) (float64, bool) { return r.OpsPerS, r.OpsPerS > 0 }
	handoffP50 = field(func(r *Result) *float64 { return r.HandoffOtherP50Ms })
	retake     = field(func(r *Result) *float64 { return r.RetakePct })
	waitP99    = field(func(r *Result) *float64 { return r.WaitP99Ms })
	waitMax    = field(func(r *Result) *float64 { return r.WaitMaxMs })
	p50        = field(func(r *Result) *float64 { return r.P50Ms })
)

// field reads an optional figure of a result.
func field(get func(r *Result) *float64) func(r *Result) (float64, bool) {
	return func(r *Result) (float64, bool) {
		if p := get(r); p != nil {
			return *p, true
		}
		return 0, false
	}
}

var redisPollers = []string{"raw", "redislock-linear", "redislock-exp", "redsync"}

// issueFigures are the first measurement's figures (2 cores, loopback, two
// runs), as issue #7 states them.
var issueFigures = []issueFigure{
	{"cycle", []string{"raw"}, "redis", "uncontended cycles/s", "~6,000–10,000", ops, "/s", ""},
	{"cycle", []string{"redislock-noretry", "redislock-linear", "redislock-exp"}, "redis", "uncontended cycles/s", "~8,000–10,000", ops, "/s", ""},
	{"cycle", []string{"redsync"}, "redis", "uncontended cycles/s", "~7,000", ops, "/s", ""},
	{"cycle", []string{"etcd-mutex"}, "etcd", "uncontended cycles/s", "~600", ops, "/s", "fsync"},
	{"cycle", []string{"zk-lock"}, "zookeeper", "uncontended cycles/s", "~430", ops, "/s", "fsync"},
	{"contention", redisPollers, "redis", "16 workers: hand-off p50", "~0.3 ms", handoffP50, " ms", ""},
	{"contention", redisPollers, "redis", "16 workers: acquisitions/s", "~650", ops, "/s", "hold"},
	{"contention", redisPollers, "redis", "16 workers: re-take by the releaser", "82–98%", retake, "%", ""},
	{"contention", redisPollers, "redis", "16 workers: wait p99", "~500–670 ms", waitP99, " ms", ""},
	{"contention", redisPollers, "redis", "16 workers: wait max", "5–7 s", waitMax, " ms", "rounds"},
	{"contention", []string{"etcd-mutex"}, "etcd", "16 workers: hand-off p50", "~4 ms", handoffP50, " ms", "fsync"},
	{"contention", []string{"etcd-mutex"}, "etcd", "16 workers: acquisitions/s", "~155", ops, "/s", "hold"},
	{"contention", []string{"zk-lock"}, "zookeeper", "16 workers: hand-off p50", "~2–3 ms", handoffP50, " ms", "fsync"},
	{"contention", []string{"zk-lock"}, "zookeeper", "16 workers: acquisitions/s", "~220–260", ops, "/s", "hold"},
	{"failover", []string{"raw"}, "redis", "fail-over p50, TTL 2 s", "~2006 ms", p50, " ms", ""},
	{"failover", []string{"redislock-linear", "redislock-exp"}, "redis", "fail-over p50, TTL 2 s", "2040–2290 ms", p50, " ms", ""},
	{"failover", []string{"redsync"}, "redis", "fail-over p50, TTL 2 s", "~2040–2070 ms", p50, " ms", ""},
	{"failover", []string{"etcd-mutex"}, "etcd", "fail-over p50, TTL 2 s", "~2190 ms", p50, " ms", "expiry"},
	{"failover", []string{"zk-lock"}, "zookeeper", "fail-over p50, TTL 2 s", "~2160–2185 ms", p50, " ms", "tick"},
}

// issueDiffers explains each setting of this harness that differs from the
// first measurement's, by key of issueFigure.differs.
func issueDiffers(m Meta) map[string]string {
	fsync := "both stores fsynced every write in this run, as deployed"
	if m.EtcdFsync != "yes" || m.ZKForceSync != "yes" {
		fsync = fmt.Sprintf("in this run etcd had %s; ZooKeeper %s. A write that skips its fsync is several times faster, so these figures are not comparable", syncSetting("fsync", m.EtcdFsync), syncSetting("forceSync", m.ZKForceSync))
	}
	return map[string]string{
		"fsync":  "every write waits for the server's disk, which differs from machine to machine; " + fsync,
		"hold":   "the hold here is a nanosleep(2) of 1 ms; the first measurement's `time.Sleep(1ms)` lasts 1–2 ms (§2), and a FIFO lock's acquisitions/s is about 1 / (hold + hand-off)",
		"rounds": "the systems run interleaved in rounds of 4 s (§2), so no wait here can last longer than a round: a starved worker shows as waits of about 4 s, not 5–7",
		"expiry": "etcd expires leases on its lessor's checks, about every 500 ms, so fail-over is the TTL plus up to about 500 ms by the phase of those checks, alike for leasekit and etcd-mutex in one run (§3; the first measurement's phase is not known)",
		"tick":   "ZooKeeper expires sessions at tickTime boundaries: TTL + up to one tick (500 ms here; the first measurement's tick is not known)",
	}
}

// peersVsIssue writes the section that sets the issue's first measurement
// beside this run's figures for the same peers.
func peersVsIssue(w func(string, ...any), x index, m Meta) {
	w("\n## The peers against the issue's first measurement\n\n")
	w("Issue #7 quotes what a first measurement on this kind of machine showed for the peers. The same figures, measured in this run (a range where the issue's figure covers several peers); the last column names the setting that differs where one does.\n\n")
	w("| figure | peers | store | issue | this run | what differs |\n|---|---|---|---:|---:|---|\n")
	differs := issueDiffers(m)
	var used []string
	seen := map[string]bool{}
	for _, f := range issueFigures {
		lo, hi, n := 0.0, 0.0, 0
		for _, sys := range f.systems {
			r := x.get(f.scenario, sys, f.store)
			if r == nil {
				continue
			}
			v, ok := f.value(r)
			if !ok {
				continue
			}
			if n == 0 || v < lo {
				lo = v
			}
			if n == 0 || v > hi {
				hi = v
			}
			n++
		}
		got := "–"
		if n > 0 {
			got = f1(lo) + f.unit
			if n > 1 && f1(lo) != f1(hi) {
				got = f1(lo) + "–" + f1(hi) + f.unit
			}
		}
		note := ""
		if f.differs != "" {
			note = f.differs
			if !seen[f.differs] {
				seen[f.differs] = true
				used = append(used, f.differs)
			}
		}
		w("| %s | %s | %s | %s | %s | %s |\n", f.what, strings.Join(f.systems, ", "), f.store, f.issue, got, note)
	}
	if len(used) > 0 {
		w("\n")
		for _, k := range used {
			w("- *%s*: %s.\n", k, differs[k])
		}
	}
}
