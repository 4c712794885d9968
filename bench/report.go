// docs/BENCHMARKS.md: every figure beside its peers, the ratios, and a
// verdict (met / missed, with the numbers) for each target of issue #7.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
)

func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// index finds results by scenario/system/store (and clients for pg-contention).
type index []Result

func (x index) get(scn, sys, store string) *Result {
	for i := range x {
		r := &x[i]
		if r.Scenario == scn && r.System == sys && r.Store == store && r.Skipped == "" {
			return r
		}
	}
	return nil
}

func v(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// redislockSpread returns the lowest and highest cycles/s of the three
// redislock strategies (0, 0 without them): uncontended they do the same
// work, so their spread is the run's noise.
func redislockSpread(x index) (lo, hi float64) {
	var ops []float64
	for _, name := range []string{"redislock-noretry", "redislock-linear", "redislock-exp"} {
		r := x.get("cycle", name, "redis")
		if r == nil || r.OpsPerS <= 0 {
			return 0, 0
		}
		ops = append(ops, r.OpsPerS)
	}
	return slices.Min(ops), slices.Max(ops)
}

// fifoIdeal is a contention result's FIFO ideal wait in ms: (N−1) ×
// (hold as slept + hand-off p50).
func fifoIdeal(r *Result) float64 {
	return float64(r.Clients-1) * (heldMs(r) + v(r.HandoffOtherP50Ms))
}

// f3 formats a latency in ms with three decimals (tens of µs).
func f3(x float64) string { return fmt.Sprintf("%.3f", x) }

func f1(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

func fp(p *float64) string {
	if p == nil {
		return "–"
	}
	return f1(*p)
}

// reqPerOp is the client's wire requests per acquisition (cycle: per
// acquire+release), "–" where not counted (file, memory).
func reqPerOp(r Result) string {
	if f, ok := r.Counters["client_requests_per_op"].(float64); ok {
		return f1(f)
	}
	return "–"
}

func fi(p *int) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprint(*p)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// verdict is one row of the targets table.
type verdict struct {
	target, store, ours, theirs, ratio string
	met                                *bool
}

func mark(ok *bool) string {
	switch {
	case ok == nil:
		return "n/a (not measured)"
	case *ok:
		return "**met**"
	default:
		return "**missed**"
	}
}

func bptr(b bool) *bool { return &b }

var lkStores = []string{"redis", "postgres-table", "postgres-advisory", "mysql-table", "mysql-getlock", "etcd", "zookeeper", "nats", "file"}

// peerOn is the peer a leasekit store is compared with in scenarios 2 and 3.
var peerOn = map[string]string{"etcd": "etcd-mutex", "zookeeper": "zk-lock"}

// bestRedislock returns the redislock variant with the most acquisitions/s.
func bestRedislock(x index, scn string) *Result {
	var best *Result
	for _, n := range []string{"redislock-noretry", "redislock-linear", "redislock-exp"} {
		if r := x.get(scn, n, "redis"); r != nil && (best == nil || r.OpsPerS > best.OpsPerS) {
			best = r
		}
	}
	return best
}

func verdicts(x index) []verdict {
	var out []verdict
	// (1) cycle
	if lk := x.get("cycle", "leasekit", "redis"); lk != nil {
		if rl := x.get("cycle", "redislock-noretry", "redis"); rl != nil {
			out = append(out, verdict{"(1) cycles/s ≥ 1.0× redislock", "redis", f1(lk.OpsPerS) + "/s",
				f1(rl.OpsPerS) + "/s (" + rl.System + ")", ratio(lk.OpsPerS, rl.OpsPerS), bptr(lk.OpsPerS >= rl.OpsPerS)})
		}
		if raw := x.get("cycle", "raw", "redis"); raw != nil {
			out = append(out, verdict{"(1) cycles/s ≥ 0.9× raw floor (with a fence)", "redis", f1(lk.OpsPerS) + "/s",
				f1(raw.OpsPerS) + "/s", ratio(lk.OpsPerS, raw.OpsPerS), bptr(lk.OpsPerS >= 0.9*raw.OpsPerS)})
		}
	}
	// (2) contention
	for _, st := range lkStores {
		lk := x.get("contention", "leasekit", st)
		if lk == nil {
			continue
		}
		n := float64(lk.Clients)
		lim := 100/n + 2
		out = append(out, verdict{fmt.Sprintf("(2) releaser re-take ≤ 1/%d + noise (%.1f%%)", lk.Clients, lim), st,
			fp(lk.RetakePct) + "%", "", "", bptr(lk.RetakePct != nil && *lk.RetakePct <= lim)})
		mean := float64(lk.Samples) / n
		lo, hi := 0.0, 0.0
		if mean > 0 {
			lo, hi = float64(*lk.PerWorkerMin)/mean-1, float64(*lk.PerWorkerMax)/mean-1
		}
		out = append(out, verdict{"(2) per-worker spread within ±10%", st,
			fmt.Sprintf("%d..%d (mean %.0f: %+.0f%%/%+.0f%%)", *lk.PerWorkerMin, *lk.PerWorkerMax, mean, 100*lo, 100*hi), "", "",
			bptr(mean > 0 && lo >= -0.1 && hi <= 0.1)})
		ideal := fifoIdeal(lk)
		theirs := fmt.Sprintf("2× ideal = %s ms", f1(2*ideal))
		if peer, ok := peerOn[st]; ok {
			if p := x.get("contention", peer, st); p != nil {
				pi := float64(p.Clients-1) * (heldMs(p) + v(p.HandoffOtherP50Ms))
				theirs += fmt.Sprintf(" (%s: %s ms = %s its ideal)", peer, fp(p.WaitMaxMs), ratio(v(p.WaitMaxMs), pi))
			}
		}
		out = append(out, verdict{"(2) wait max ≤ 2× FIFO ideal (N−1)×(hold+hand-off p50)", st,
			fp(lk.WaitMaxMs) + " ms", theirs, ratio(v(lk.WaitMaxMs), ideal) + " ideal",
			bptr(lk.WaitMaxMs != nil && *lk.WaitMaxMs <= 2*ideal)})
		if peer, ok := peerOn[st]; ok {
			if p := x.get("contention", peer, st); p != nil {
				out = append(out, verdict{"(2) hand-off p50 ≤ " + peer, st, fp(lk.HandoffOtherP50Ms) + " ms",
					fp(p.HandoffOtherP50Ms) + " ms", ratio(v(lk.HandoffOtherP50Ms), v(p.HandoffOtherP50Ms)),
					bptr(lk.HandoffOtherP50Ms != nil && p.HandoffOtherP50Ms != nil && *lk.HandoffOtherP50Ms <= *p.HandoffOtherP50Ms)})
				out = append(out, verdict{"(2) acquisitions/s ≥ 1.0× " + peer, st, f1(lk.OpsPerS) + "/s",
					f1(p.OpsPerS) + "/s", ratio(lk.OpsPerS, p.OpsPerS), bptr(lk.OpsPerS >= p.OpsPerS)})
			}
		} else {
			out = append(out, verdict{"(2) hand-off to another worker p50 ≤ 2 ms", st, fp(lk.HandoffOtherP50Ms) + " ms", "2 ms", "",
				bptr(lk.HandoffOtherP50Ms != nil && *lk.HandoffOtherP50Ms <= 2)})
		}
		if st == "redis" {
			if rl := bestRedislock(x, "contention"); rl != nil {
				out = append(out, verdict{"(2) acquisitions/s ≥ 0.8× redislock (unfair)", st, f1(lk.OpsPerS) + "/s",
					f1(rl.OpsPerS) + "/s (" + rl.System + ")", ratio(lk.OpsPerS, rl.OpsPerS), bptr(lk.OpsPerS >= 0.8*rl.OpsPerS)})
			}
		}
	}
	// (3) fail-over
	for _, st := range lkStores {
		lk := x.get("failover", "leasekit", st)
		if lk == nil {
			continue
		}
		if peer, ok := peerOn[st]; ok {
			if p := x.get("failover", peer, st); p != nil {
				// Both wait for the same server-side expiry (granularity ~500 ms):
				// sub-millisecond differences between 10 trials are noise.
				out = append(out, verdict{"(3) fail-over p99 ≤ " + peer + " (+1% noise)", st, fp(lk.P99Ms) + " ms", fp(p.P99Ms) + " ms",
					ratio(v(lk.P99Ms), v(p.P99Ms)), bptr(v(lk.P99Ms) <= 1.01*v(p.P99Ms))})
			}
			continue
		}
		lim := lk.TTLMs + 50
		out = append(out, verdict{"(3) fail-over p99 ≤ TTL + 50 ms", st, fp(lk.P99Ms) + " ms", f1(lim) + " ms", "",
			bptr(v(lk.P99Ms) <= lim)})
	}
	// (4) heartbeat
	for _, st := range lkStores {
		lk := x.get("heartbeat", "leasekit", st)
		if lk == nil {
			continue
		}
		what := "round trip"
		switch {
		case st == "file":
			what = "store call (no network)"
		case !hasWireCounter(st):
			what = "store call (≥ 1 round trip each)"
		}
		lost := counterFloat(lk.Counters["lost_total"])
		got := fp(lk.RoundTripsPerInterval)
		if lost > 0 {
			got += fmt.Sprintf(", %.0f leases lost", lost)
		}
		out = append(out, verdict{fmt.Sprintf("(4) ≤ 1 %s per renew interval (%d leases)", what, lk.Leases), st,
			got, "1", "", bptr(lost == 0 && v(lk.RoundTripsPerInterval) <= 1.001)}) // the window spans whole intervals (heartbeat.go); 0.001 is rounding slack only
		out = append(out, verdict{"(4) < 2 KiB memory (heap + stacks) per held lease", st, fp(lk.BytesPerLease) + " B", "2048 B", "",
			bptr(v(lk.BytesPerLease) < 2048)})
	}
	out = append(out, manyKeysVerdicts(x)...)
	return out
}

// manyKeysVerdicts are issue #26's targets: the many-keys and held-100k
// scenarios.
func manyKeysVerdicts(x index) []verdict {
	var out []verdict
	if lk, rl := x.get("many-keys", "leasekit", "redis"), x.get("many-keys", "redislock", "redis"); lk != nil && rl != nil {
		out = append(out, verdict{"(8) many keys: ops/s ≥ 3× redislock", "redis", f1(lk.OpsPerS) + "/s", f1(rl.OpsPerS) + "/s",
			ratio(lk.OpsPerS, rl.OpsPerS), bptr(lk.OpsPerS >= 3*rl.OpsPerS)})
		var ok *bool
		if lk.ServerCPUUsPerOp != nil && rl.ServerCPUUsPerOp != nil {
			ok = bptr(*lk.ServerCPUUsPerOp <= 0.5**rl.ServerCPUUsPerOp)
		}
		out = append(out, verdict{"(8) many keys: server CPU per op ≤ 0.5× redislock", "redis", fp(lk.ServerCPUUsPerOp) + " µs",
			fp(rl.ServerCPUUsPerOp) + " µs", ratio(v(lk.ServerCPUUsPerOp), v(rl.ServerCPUUsPerOp)), ok})
		out = append(out, verdict{"(8) many keys: p99 ≤ redislock", "redis", fp(lk.P99Ms) + " ms", fp(rl.P99Ms) + " ms",
			ratio(v(lk.P99Ms), v(rl.P99Ms)), bptr(lk.P99Ms != nil && rl.P99Ms != nil && *lk.P99Ms <= *rl.P99Ms)})
	}
	for _, st := range []string{"etcd", "zookeeper"} {
		lk, p := x.get("many-keys", "leasekit", st), x.get("many-keys", peerOn[st], st)
		if lk == nil || p == nil {
			continue
		}
		out = append(out, verdict{"(8) many keys: ops/s ≥ 3× " + p.System, st, f1(lk.OpsPerS) + "/s", f1(p.OpsPerS) + "/s",
			ratio(lk.OpsPerS, p.OpsPerS), bptr(lk.OpsPerS >= 3*p.OpsPerS)})
	}
	for _, st := range heldStores {
		lk := x.get("held-100k", "leasekit", st)
		if lk == nil {
			continue
		}
		lost := counterFloat(lk.Counters["lost_total"])
		got := fp(lk.RoundTripsPerInterval)
		if lost > 0 {
			got += fmt.Sprintf(", %.0f leases lost", lost)
		}
		out = append(out, verdict{fmt.Sprintf("(9) held: 1.00 round trip per renew interval (%d leases)", lk.Leases), st,
			got, "1", "", bptr(lost == 0 && v(lk.RoundTripsPerInterval) <= 1.001)})
		out = append(out, verdict{fmt.Sprintf("(9) held: < 1 KiB memory (heap + stacks) per lease (%d leases)", lk.Leases), st,
			fp(lk.BytesPerLease) + " B", "1024 B", "", bptr(v(lk.BytesPerLease) < 1024)})
	}
	return out
}

// zkMultiBudgetKiB is zklease's renewal multi budget (renew.go's
// multiBudget: 0xfffff − 64 KiB), in KiB.
const zkMultiBudgetKiB = (0xfffff - 64<<10) >> 10

// counterFloat returns a counter's value, whether it is still the
// measuring code's integer or came back from JSON as a float64.
func counterFloat(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case int64:
		return float64(n)
	case int:
		return float64(n)
	case uint64:
		return float64(n)
	}
	return 0
}

func writeReport(dir string, rs []Result, notes []string, m Meta) error {
	imgDir := filepath.Join(dir, "bench")
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		return err
	}
	plots, err := writePlots(imgDir, rs)
	if err != nil {
		notes = append(notes, err.Error())
	}
	x := index(rs)
	var b strings.Builder
	w := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }

	w("# leasekit benchmarks\n\n")
	w("Generated by `bench/` (issue #7) — do not edit by hand. Regenerate with:\n\n")
	w("```sh\nLEASE_TEST_DURABLE=1 ./scripts/test --no-install --exec bash -c 'cd bench && go run . -private-redis -out ../docs'   # from the repository root; about 10–15 minutes\n```\n\n")
	w("(`-quick` runs every scenario briefly, in a few minutes; see [bench/README.md](../bench/README.md).)\n\n")
	mode := "full"
	if m.Quick {
		mode = "**quick** (short durations; development only)"
	}
	w("Run: %s, leasekit commit %s, %s, %s, %d cores (%s), loopback servers, %s run in %.0f s. ", m.Date, m.Commit, m.GoVersion, m.OS, m.Cores, m.CPU, mode, m.Duration.Seconds())
	w("Every figure below was measured **in this one run**, leasekit beside the peers; ratios are leasekit ÷ peer. ")
	w("The machine has 2 shared cores, and other test runs may be active at the same time: expect ±20–30%% noise between runs; compare ratios, not absolute numbers.\n\n")
	redisWhere := "system service"
	if m.PrivateRedis {
		redisWhere = "a private redis-server started by the benchmark"
	}
	w("Servers: Redis 7 (%s), PostgreSQL 15 (system service, shared test database), etcd (%s) and ZooKeeper (%s; tickTime 500 ms, a fixed 256 MiB JVM heap with a 12 MiB young generation, so that no full collection stalls a run) private to the run, all on 127.0.0.1; read from `LEASE_TEST_REDIS_ADDR`, `LEASE_TEST_POSTGRES_DSN`, `LEASE_TEST_ETCD_ENDPOINTS`, `LEASE_TEST_ZK_SERVERS` (`scripts/test --exec` sets them; a store whose variable is unset is skipped and listed below). The heartbeat scenario on Redis uses its own private `redis-server` on a free loopback port.\n\n", redisWhere, syncSetting("fsync", m.EtcdFsync), syncSetting("forceSync", m.ZKForceSync))
	for _, n := range notes {
		w("- Note: %s\n", n)
	}
	for _, r := range rs {
		if r.Skipped != "" {
			w("- Skipped: %s %s/%s: %s\n", r.Scenario, r.System, r.Store, r.Skipped)
		}
	}
	w("\n## Targets\n\n| target | store | leasekit | peer / bound | ratio | verdict |\n|---|---|---:|---:|---:|---|\n")
	vs := verdicts(x)
	met := 0
	for _, vd := range vs {
		if vd.met != nil && *vd.met {
			met++
		}
		w("| %s | %s | %s | %s | %s | %s |\n", vd.target, vd.store, vd.ours, vd.theirs, vd.ratio, mark(vd.met))
	}
	w("\n%d of %d targets met in this run.\n\n", met, len(vs))
	missedWhy(w, x, vs)

	// Systems.
	w("## Systems\n\n| system | store | configuration |\n|---|---|---|\n")
	seen := map[string]bool{}
	for _, r := range rs {
		k := r.System + "/" + r.Store
		if seen[k] || r.Note == "" {
			continue
		}
		seen[k] = true
		w("| %s | %s | %s |\n", r.System, r.Store, r.Note)
	}
	img := func(name string) {
		for _, p := range plots {
			if p == name {
				w("\n![%s](bench/%s)\n", strings.TrimSuffix(name, ".png"), name)
			}
		}
	}

	// 1. cycle
	w("\n## 1. Uncontended acquire + release (one client, one key)\n\n")
	w("One client acquires and releases one key in a loop (after 20 warm-up cycles). leasekit issues a fence on every acquisition; the peers do not. TTL 10 s. The systems run interleaved in rounds of 0.5 s, %.0f s each in total, each round starting with the next system, so that load changes on the shared machine hit them alike. Ratios are against redislock with NoRetry (uncontended, the three redislock strategies do the same work) and the raw floor.\n\n", m.Plan.CycleDur.Seconds())
	w("| system | store | cycles/s | p10 ms | p50 ms | p99 ms | max ms | requests / cycle | vs redislock | vs raw |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	rl, raw := x.get("cycle", "redislock-noretry", "redis"), x.get("cycle", "raw", "redis")
	for _, r := range rs {
		if r.Scenario != "cycle" || r.Skipped != "" {
			continue
		}
		a, c := "", ""
		if r.Store == "redis" && rl != nil {
			a = ratio(r.OpsPerS, rl.OpsPerS)
		}
		if r.Store == "redis" && raw != nil {
			c = ratio(r.OpsPerS, raw.OpsPerS)
		}
		if p, ok := peerOn[r.Store]; ok && r.System == "leasekit" {
			if pr := x.get("cycle", p, r.Store); pr != nil {
				a = ratio(r.OpsPerS, pr.OpsPerS) + " (vs " + p + ")"
			}
		}
		p10 := "–"
		if q := counterF(&r, "p10_ms"); q > 0 {
			p10 = f3(q)
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.System, r.Store, f1(r.OpsPerS), p10, fp(r.P50Ms), fp(r.P99Ms), fp(r.MaxMs), reqPerOp(r), a, c)
	}
	spread := ""
	if lo, hi := redislockSpread(x); lo > 0 {
		spread = fmt.Sprintf(": %s to %s cycles/s in this run", f1(lo), f1(hi))
	}
	w("\n*p10* is the 10th percentile of a cycle's latency. On this machine the cycle time has two modes: tens of µs when client and server stay on their cores, about a hundred µs more when one of them must wake an idle core; cycles/s follows the share of fast cycles, which the machine decides and which varies between runs more than the systems differ (see the three redislock strategies, which do the same work uncontended%s). The fast cycles, p10, show each system's own cost.\n", spread)
	fenceLadder(w, x)
	img("cycle.png")

	// 2. contention
	w("\n## 2. Contention and fairness: %d workers, one key, %s ms hold\n\n", m.Plan.Workers, f1(ms(m.Plan.Hold)))
	w("Each worker has its own connection/session/client; it acquires (waiting with the system's own strategy), holds %s ms, releases and queues again at once, for %.0f s in all: the systems run interleaved in rounds of 4 s, each round starting with the next system (all set up first and kept connected, each after an unmeasured warm-up phase of %.1f s that opens what a system opens lazily: connections, leasekit's release subscription), so that load changes on the shared machine hit them alike. ", f1(ms(m.Plan.Hold)), m.Plan.ContDur.Seconds(), contentionWarmUp.Seconds())
	w("*Hand-off* is the time from a release (just before the release call) to the next acquisition **by a different worker**; *re-take* is the share of acquisitions that went back to the worker that had just released; *wait* is each acquire call's duration, including the waits still running when a round ended (lower bounds, so that starved workers show; a wait is therefore at most one round, 4 s, long). ")
	w("The FIFO ideal wait is (N−1)×(hold + hand-off p50), with the hold as slept (the mean measured hold, which the kernel's timer slack makes a little longer than asked). *Requests / acq* counts every request the workers' clients sent (go-redis hook: a pipeline counts once; pgx tracer; gRPC unary calls and stream messages, a pipeline of messages on a stream once as in §4; ZooKeeper socket writes, pings included) per acquisition: failed attempts, releases and keepalives included. The hold is a nanosleep(2) of the worker's thread, and *hold as slept* is its mean, measured from the acquisition to the release call. A `time.Sleep` would not hold for the same time with every system: when the Go runtime has nothing else to run it waits for the timer in the network poller, in whole milliseconds counted from the poller's last wake, so a 1 ms sleep lasts 1 to 2 ms, the longer the more the system under test sends during the hold (2026-12-01, 16 workers on ZooKeeper with `time.Sleep`: 1.42 ms for zk-lock, 1.81 ms for leasekit, whose next waiter lists the nodes during the hold). `-sleep-hold` holds with `time.Sleep`, as the issue's first measurement did; acq/s is about 1 / (hold as slept + mean hand-off). TTL 5 s (etcd: 5 s; ZooKeeper session timeout 5 s).\n\n")
	if m.Plan.SleepHold {
		w("**This run held with `time.Sleep` (`-sleep-hold`), not nanosleep.**\n\n")
	}
	w("| system | store | acq/s | hand-off p50 | p99 | re-take %% | wait p50 | wait p99 | wait max | FIFO ideal | max ÷ ideal | per worker min..max | requests / acq | hold as slept | acq/s vs peer |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	rlc := bestRedislock(x, "contention")
	for _, r := range rs {
		if r.Scenario != "contention" || r.Skipped != "" {
			continue
		}
		ideal := fifoIdeal(&r)
		rr := ""
		if r.System == "leasekit" && r.Store == "redis" && rlc != nil {
			rr = ratio(r.OpsPerS, rlc.OpsPerS)
		}
		if p, ok := peerOn[r.Store]; ok && r.System == "leasekit" {
			if pr := x.get("contention", p, r.Store); pr != nil {
				rr = ratio(r.OpsPerS, pr.OpsPerS) + " (vs " + p + ")"
			}
		}
		hold := "–"
		if h := counterF(&r, "hold_mean_ms"); h > 0 {
			hold = fmt.Sprintf("%.2f", h)
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s..%s | %s | %s | %s |\n", r.System, r.Store, f1(r.OpsPerS),
			fp(r.HandoffOtherP50Ms), fp(r.HandoffOtherP99Ms), fp(r.RetakePct), fp(r.WaitP50Ms), fp(r.WaitP99Ms), fp(r.WaitMaxMs),
			f1(ideal), ratio(v(r.WaitMaxMs), ideal), fi(r.PerWorkerMin), fi(r.PerWorkerMax), reqPerOp(r), hold, rr)
	}
	w("\nLatencies in ms. Per-worker acquisition counts:\n\n")
	for _, r := range rs {
		if r.Scenario == "contention" && r.Skipped == "" {
			w("- %s/%s: %v\n", r.System, r.Store, r.PerWorker)
		}
	}
	img("contention-throughput.png")
	img("contention-fairness.png")
	img("contention-handoff.png")
	img("contention-wait.png")

	// Redis server cost (only with -private-redis).
	var costRows []string
	for _, r := range rs {
		if r.Skipped != "" || r.Counters == nil || (r.Scenario != "cycle" && r.Scenario != "contention") {
			continue
		}
		if cpu, ok := r.Counters["redis_server_cpu_us_per_op"].(float64); ok {
			cmds, _ := r.Counters["redis_commands_per_op"].(float64)
			inCmds := ""
			if us, ok := r.Counters["redis_command_us_per_op"].(float64); ok {
				inCmds = f1(us)
			}
			costRows = append(costRows, fmt.Sprintf("| %s | %s | %s | %s | %s |", r.Scenario, r.System, f1(cpu), inCmds, f1(cmds)))
		}
	}
	if len(costRows) > 0 {
		w("\n### Redis server cost per acquisition\n\nFrom the private redis-server's INFO, over the periods each system ran; per acquisition+release cycle (cycle) or per acquisition (contention, failed attempts included). *Server CPU* is the process's `used_cpu_user+used_cpu_sys`: the commands, the network and the event loop. *In commands* is the time the server spent executing the commands the system's clients sent (`INFO commandstats`, summed over those commands; a script's or a transaction's time includes the commands it runs, which are not counted again): what the system's own server-side logic costs, unblurred by the machine's wake-ups. *Commands* is `total_commands_processed`, which counts the commands scripts run too.\n\n| scenario | system | server CPU µs | in commands µs | commands |\n|---|---|---:|---:|---:|\n%s\n", strings.Join(costRows, "\n"))
	}

	// 3. fail-over
	w("\n## 3. Crash fail-over (TTL 2 s, holder SIGKILLed)\n\n")
	w("A separate process (this binary, re-executed) acquires the key and reports the wall-clock instant; a waiter in the benchmark process starts waiting; 150 ms later the holder is SIGKILLed (before its first renewal at TTL/3). Fail-over = the waiter's acquisition − the holder's acquisition, so the ideal is the TTL plus the store's detection delay. etcd sessions use whole seconds (2 s); ZooKeeper sessions time out after 2 s (tickTime 500 ms). Systems ran in parallel, each with its own keys.\n\n")
	w("| system | store | trials | p50 ms | p99 ms | max ms | kill → next holder p50 | p99 vs peer |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.Scenario != "failover" || r.Skipped != "" {
			continue
		}
		pv := ""
		if p, ok := peerOn[r.Store]; ok && r.System == "leasekit" {
			if pr := x.get("failover", p, r.Store); pr != nil {
				pv = ratio(v(r.P99Ms), v(pr.P99Ms))
			}
		}
		k := "–"
		if r.Counters != nil {
			if kk, ok := r.Counters["kill_to_next_holder_p50_ms"].(float64); ok {
				k = f1(kk)
			}
		}
		w("| %s | %s | %d (%d failed) | %s | %s | %s | %s | %s |\n", r.System, r.Store, r.Samples, r.Errors, fp(r.P50Ms), fp(r.P99Ms), fp(r.MaxMs), k, pv)
	}
	for _, r := range rs {
		if r.Scenario == "failover" && r.Skipped == "" && v(r.P50Ms) < r.TTLMs {
			w("\n- %s/%s fails over in less than the TTL (p50 %s ms): the server freed the key when the holder's session died, and the waiter found it free at its next attempt.\n", r.System, r.Store, fp(r.P50Ms))
		}
	}
	w("\nWith %d trials per system, p99 is the largest trial. Individual trials are in results.json (`trials_ms`).\n", m.Plan.Trials)
	img("failover.png")

	// 4. heartbeat
	w("\n## 4. Heartbeat cost: many leases held by one client\n\n")
	w("One `lease.Client` in its own process acquires the leases (32 goroutines, TryAcquire), waits 1.5 renew intervals for the renewals to converge, then measures for %.0f s, a whole number of renew intervals from half an interval after a renewal round, so that the window's edges fall between rounds and each round is counted once. TTL 6 s, renew interval 2 s. *Round trips* are counted on the client's wire, a pipeline once (go-redis hook: a command or a pipeline; pgx tracer: statements; gRPC interceptors: a unary call, or on a stream a message sent while none of that stream's earlier messages awaits its answer, so that messages sent behind it before it is answered count with it; ZooKeeper: writes on the socket, pings included); for the file store, store calls (no network). *Messages* counts every request in them (each command of a pipeline, each gRPC message). *Server* is the server's own counter for the same window: it counts the work per lease (etcd: every keep-alive message received), however the client packs it. *Memory per lease* is the Go heap plus the goroutine stacks (`HeapAlloc + StackInuse`) after GC with the leases held (least of six readings over a renew interval, so that one falls between renewal rounds) minus before, divided by the number of leases (client and store state; a goroutine per lease would show here as at least 2 KiB of stack). CPU is the child process's user+system time over the window, in %% of one core. PostgreSQL advisory mode holds at most %d leases here: each session-level lock takes a slot of the server's shared lock table (max_locks_per_transaction × max_connections, 6,400 by default).\n\n", m.Plan.HBDur.Seconds(), advisoryHBLeases)
	var sources []string
	w("| store | leases | round trips / interval | messages / interval | store calls / interval | server counter / interval | memory per lease | client CPU | leases lost | acquire time |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.Scenario != "heartbeat" || r.Skipped != "" {
			continue
		}
		c := r.Counters
		num := func(k string) string {
			if _, ok := c[k]; ok {
				return f1(counterFloat(c[k]))
			}
			return "–"
		}
		server := num("server_requests_per_interval")
		if s, ok := c["server_counter"].(string); ok {
			sources = append(sources, r.Store+": "+s)
		}
		if s, ok := c["server_error"].(string); ok {
			server = "error: " + s
		}
		w("| %s | %d | %s | %s | %s | %s | %s B | %s%% | %s | %s s |\n", r.Store, r.Leases, fp(r.RoundTripsPerInterval),
			num("wire_messages_per_interval"), num("store_calls_per_interval"), server, fp(r.BytesPerLease), fp(r.CPUPercent), num("lost_total"), num("acquire_s"))
	}

	if len(sources) > 0 {
		w("\nServer counters: %s.\n", strings.Join(sources, "; "))
	}
	for _, r := range rs {
		if r.Scenario != "heartbeat" || r.Skipped != "" || r.Counters == nil {
			continue
		}
		if f, ok := r.Counters["renew_failures_total"].(float64); ok && f > 0 {
			w("\n- **%s: %.0f renewal failures** during the scenario (the Client retried them; leases lost: %v).", r.Store, f, r.Counters["lost_total"])
		}
		if e, ok := r.Counters["acquire_error"].(string); ok {
			w("\n- %s: %d of the leases could not be acquired; last error: `%s`", r.Store, m.Plan.HBLeases-r.Leases, e)
		}
		if mc, ok := r.Counters["max_connections"].(string); ok {
			w("\n- %s: the server's max_connections is %s; the store's leases share one session, but each lock takes a slot of the server's lock table (max_locks_per_transaction × max_connections), so %d of the %d leases were held.", r.Store, mc, r.Leases, m.Plan.HBLeases)
		}
	}
	w("\n")

	// 5. pg contention
	w("\n## 5. Contention on the PostgreSQL stores\n\n")
	w("The shape of the former `pglease` `BenchmarkContention`, in this run: N clients on one key acquire (waiting, woken by NOTIFY) and release at once (no hold); p50/p99 are the acquire waits, hand-off as in §2. The 16-worker, 1 ms-hold figures for both modes are in §2. The PostgreSQL issue's full table (1/8/64 clients, 1/64 keys, private server with fsync on) is in [stores.md](stores.md#measured-contention-table-vs-advisory): table mode 1225 → 307 → 73 ops/s and advisory 861 → 396 → 110 ops/s for 1 → 8 → 64 clients on one key.\n\n")
	w("| mode | clients | acq/s | wait p50 | wait p99 | wait max | hand-off p50 | hand-off p99 | re-take %% | per worker min..max |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.Scenario == "pg-contention" && r.Skipped == "" {
			w("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s..%s |\n", r.Store, r.Clients, f1(r.OpsPerS), fp(r.WaitP50Ms), fp(r.WaitP99Ms),
				fp(r.WaitMaxMs), fp(r.HandoffOtherP50Ms), fp(r.HandoffOtherP99Ms), fp(r.RetakePct), fi(r.PerWorkerMin), fi(r.PerWorkerMax))
		}
	}
	readHeavySection(w, rs, x, m)
	acquireAllSection(w, rs, x, m)
	manyKeysSection(w, rs, m)
	peersVsIssue(w, x, m)
	w("\n%s", reportNotes)
	return os.WriteFile(filepath.Join(dir, "BENCHMARKS.md"), []byte(b.String()), 0o644)
}

// reportNotes explains how the figures come about; statements here follow
// from the code and the design, not from one run's numbers.
const reportNotes = `## Reading the results

- **Why the Redis peers look fast under contention.** redislock, redsync and the raw lock poll: a waiter
  sleeps its backoff (4–512 ms, 100 ms, 50–250 ms, 10 ms) and retries. A worker that has just released
  is awake and queues again at once, so it usually re-takes the key before any sleeper wakes: a high
  re-take share, a short hand-off, and a long tail for everyone else — some workers starve.
  Throughput counts acquisitions, not how they are shared.
- **etcd Mutex and zk.Lock are FIFO** (waiters ordered by create revision or sequence number, each
  watching its predecessor): every worker gets the same share; a hand-off costs a watch event plus a
  Raft/ZAB write. They can exceed 2× the FIFO ideal wait too (see max ÷ ideal), because a worker's queue entry and release
  are writes too; the ideal counts only hold + hand-off p50.
- **leasekit's fairness is the re-take share and the per-worker spread above**: every store queues
  waiters (FIFO by default), so the re-take share is ~0% and the spread even. A release announcement
  names the waiter first in the queue and only that waiter looks (` + "`Announcement.Next`" + `): a hand-off
  costs the release, the announcement and one acquire, whatever the number of waiters.
- **What a hand-off costs, and why the peers can be quicker on their own stores.** A leasekit release
  announces the key and names the first waiter; that waiter's own Acquire then takes the key and its new
  fence. On Redis, PostgreSQL (both modes) and files that is two writes: the release, then the waiter's
  acquire (a script, a statement, a file write), which must restart the TTL because the Client counts it
  from the start of its call. etcd Mutex and zk.Lock create the waiter's key when it starts waiting and own
  the lock as soon as the predecessor's key is deleted: one write per hand-off, then a read. leasekit does
  the same on both. On ZooKeeper the waiter's node holds the key once the nodes ahead of it are gone, and
  its Acquire, woken by the watch on its predecessor, lists the children and writes nothing. On etcd the
  release's one transaction puts the key for the waiter first in the queue (known from the releaser's
  subscription), with a new fence (the transaction's revision), on the etcd lease of that waiter's queue
  entry, and the waiter's store grants it from the watch event with no request. Both tell the Client so
  (` + "`Grant.FromQueue`" + `): the lease's TTL then runs from the write that last refreshed the waiter's
  queue entry, during its last refused attempt, and the Client counts the deadline and renewals from that
  attempt's start. An announcement never grants by itself (anyone allowed to PUBLISH, NOTIFY or write the
  namespace could forge one): the waiter's store either reads (ZooKeeper) or saw the hand-off on its own
  watch (etcd). A release that only frees the key commits asynchronously on PostgreSQL (the next
  acquisition's synchronous commit flushes the WAL past it), and a refused attempt takes no row lock, so
  waiters never queue behind the
  release. On Redis each
  ` + "`redis.call`" + ` inside a script costs the server about a microsecond (the time in commands of §2's server
  cost table, from ` + "`INFO commandstats`" + `, gives this run's figures per cycle); leasekit's acquire and
  release of a free key with nobody queued make 4 calls each (the queue check, the server clock, the fence
  counter, the lease; the lease read, the queue check, the delete, the announcement), redislock's scripts
  1 and 2 (SET NX PX; GET and DEL).
- **Fail-over** is bounded below by the TTL. A leasekit waiter without an expiry announcement sleeps until
  the holder's remaining TTL (from the store's answer) plus 1 ms; waiters racing for a key add a jitter of
  up to min(remaining/10, 50 ms), but the head of a FIFO queue, the only waiter that can take the key,
  does not: TTL + 1 ms + one round trip.
  etcd expires leases on its lessor's checks (about every 500 ms) and ZooKeeper sessions on tick
  boundaries (tickTime 500 ms here): that granularity is the store's, for leasekit and the peers alike.
- **Heartbeat round trips.** A batching store renews all due leases in one RenewMany call per interval;
  the wire requests that call costs are the store's: Redis one pipeline, PostgreSQL one statement, etcd one
  pipeline of keep-alives, one per lease's etcd lease, on one LeaseKeepAlive stream (at most 512 awaiting
  their answers: more would fill HTTP/2's 64 KiB flow-control window while the store, which starts no
  goroutine, is still sending; the server counter shows its work per lease), ZooKeeper multis packed to its 1 MiB packet limit.
  **ZooKeeper's floor is 2 multis for 10,000 leases**: leasekit expires a holder's node a TTL after its
  last write (a live session alone never expires a holder that stopped renewing), so every node is written
  each round; one renewal in a multi is 21 + len(path) + len(data) bytes (about 194 B here), 10,000 of
  them 1.94 MB, and ZooKeeper refuses a packet over jute.maxbuffer (0xfffff ≈ 1 MiB): ⌈1.94 / 1.0⌉ = 2
  multis, plus the client library's own session ping (the third request counted). **PostgreSQL advisory
  mode** holds a store's leases of one TTL on one server session, so a round is one statement on it,
  as in table mode; its floor is the server's lock table (one slot per held lock), not the network.
  **The file store** has no network:
  its one RenewMany call per interval rewrites each lease's file (an flock and a pwrite per lease), so
  batching saves calls but no I/O: client CPU at 10,000 leases was 7.4% with one Renew call per lease and
  7.3% with RenewMany (heartbeat scenario alone, 20 s windows, same machine, one after the other).
`

// syncSetting describes whether a server fsynced its writes (v: "yes",
// "no" or "" for unknown), setting naming how it was told to: with
// scripts/test's LEASE_TEST_DURABLE=1 etcd and ZooKeeper both do, as
// deployed; without it they skip it (the tests' setting), which makes every
// write of theirs several times faster than the issue's first measurement.
func syncSetting(setting, v string) string {
	switch v {
	case "yes":
		return setting + " on: every write fsynced, as deployed"
	case "no":
		return "**" + setting + " off**: not as deployed; LEASE_TEST_DURABLE=1 turns it on"
	}
	return setting + " unknown: a server given by its address"
}

// fenceSteps are the Redis systems of §1 from the raw floor to leasekit,
// each adding one thing to the one before, and what it adds.
var fenceSteps = []struct{ system, adds string }{
	{"raw", "the floor: SET NX PX, and a Lua compare-and-delete"},
	{"raw-fenced-pipe", "a fence counter: INCR pipelined with the SET (one round trip, not atomic: not yet a safe fence)"},
	{"raw-fenced-multi", "the INCR made atomic with the SET by a transaction (MULTI … EXEC)"},
	{"raw-fenced", "the INCR made atomic with the SET by a Lua script, as redislock's Obtain is a script"},
	{"leasekit", "the FIFO queue check (acquire and release), the server clock as the fence's floor, the holder's name, the release's announcement"},
}

// fenceLadder writes §1's table of what each step from the raw floor to
// leasekit costs on Redis in this run: cycles/s against raw, the fast
// cycles (p10) and the server's time in commands.
func fenceLadder(w func(string, ...any), x index) {
	raw := x.get("cycle", "raw", "redis")
	if raw == nil {
		return
	}
	w("\n**What a fence costs on Redis, in this run.** Each row adds one thing to the row before it; *in commands* is the server's time in the commands the system's clients sent, per cycle (`INFO commandstats`, §2's server cost table), which the machine's wake-ups do not blur.\n\n")
	w("| system | adds | cycles/s | vs raw | p10 ms | in commands µs | commands / cycle |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, st := range fenceSteps {
		r := x.get("cycle", st.system, "redis")
		if r == nil {
			continue
		}
		us, n := "–", "–"
		if v := counterF(r, "redis_command_us_per_op"); v > 0 {
			us = f1(v)
		}
		if v := counterF(r, "redis_commands_per_op"); v > 0 {
			n = f1(v)
		}
		w("| %s | %s | %s | %s | %s | %s | %s |\n", st.system, st.adds, f1(r.OpsPerS), ratio(r.OpsPerS, raw.OpsPerS), f3(counterF(r, "p10_ms")), us, n)
	}
}

// missedWhy lists, once per kind, why the targets missed in this run are
// missed: what the design costs there, or the store's physical floor, with
// the figures of this run where they tell it.
func missedWhy(w func(string, ...any), x index, vs []verdict) {
	seen := map[string]bool{}
	var lines []string
	for _, vd := range vs {
		if vd.met == nil || *vd.met {
			continue
		}
		var key, why string
		switch {
		case strings.HasPrefix(vd.target, "(1)"):
			key = "cycle"
			rf, rl, raw, lk := x.get("cycle", "raw-fenced", "redis"), x.get("cycle", "redislock-noretry", "redis"), x.get("cycle", "raw", "redis"), x.get("cycle", "leasekit", "redis")
			why = "**(1) Redis cycles/s**: redislock's Obtain and Release are one Lua script each (SET NX PX; GET and DEL), and a lock that issues a fence adds at least a counter write, atomic with the SET"
			if rf != nil && rl != nil && raw != nil && lk != nil {
				why += " (§1's table splits the way from raw to leasekit in this run:"
				if pp := x.get("cycle", "raw-fenced-pipe", "redis"); pp != nil {
					why += fmt.Sprintf(" the counter alone, pipelined, %s raw;", ratio(pp.OpsPerS, raw.OpsPerS))
				}
				if mt := x.get("cycle", "raw-fenced-multi", "redis"); mt != nil {
					why += fmt.Sprintf(" made atomic by a transaction, %s;", ratio(mt.OpsPerS, raw.OpsPerS))
				}
				why += fmt.Sprintf(" by a script (raw-fenced, the least a safe fenced lock does), %s raw and %s redislock; leasekit %s raw-fenced)",
					ratio(rf.OpsPerS, raw.OpsPerS), ratio(rf.OpsPerS, rl.OpsPerS), ratio(lk.OpsPerS, rf.OpsPerS))
				why += fmt.Sprintf(". Cycles/s mostly measure how often this machine keeps both processes on their cores (p10 against p50 in §1); the fast cycles show the cost: p10 %s ms for leasekit, %s for redislock, %s for raw-fenced",
					f3(counterF(lk, "p10_ms")), f3(counterF(rl, "p10_ms")), f3(counterF(rf, "p10_ms")))
				ul, ur, uf := counterF(lk, "redis_command_us_per_op"), counterF(rl, "redis_command_us_per_op"), counterF(rf, "redis_command_us_per_op")
				nl, nr := counterF(lk, "redis_commands_per_op"), counterF(rl, "redis_commands_per_op")
				if ul > 0 && ur > 0 && uf > 0 && nl > nr {
					why += fmt.Sprintf(". The difference is server time in the scripts: %s µs per cycle for leasekit, %s for redislock, %s for raw-fenced (INFO commandstats, §2's server cost table), in %.0f commands against redislock's %.0f, so about %.1f µs for each call a script makes. leasekit's extra calls are what its guarantees need: the FIFO check (EXISTS of the queue on acquire and on release: without it a newcomer or the releaser could take the key ahead of a waiter, target 2), the server clock (TIME) as the fence's floor (without it a fence could go backwards after a failover to a replica that had not seen the last increments), the fence counter itself (GETSET), and the release's PUBLISH (waiters and election watchers wake on it instead of polling); the holder's name (Inspect, HeldError) rides in the lease's one SET",
						f1(ul), f1(ur), f1(uf), nl, nr, (ul-ur)/(nl-nr))
				}
			}
			why += ". The scripts' common paths were cut to these calls (docs/stores.md gives the measured steps); what is left is what a FIFO-fair lock with a clock-floored fence and a holder name costs."
		case strings.HasPrefix(vd.target, "(2) wait max"):
			n, stall := "", ""
			if r := x.get("contention", "leasekit", vd.store); r != nil {
				n = fmt.Sprintf(" of %d", r.Samples)
				if hm := counterF(r, "handoff_other_max_ms"); hm > 0 && r.HandoffOtherP99Ms != nil {
					stall = fmt.Sprintf(" (the longest hand-off of this run took %s ms, against a p99 of %s ms)", f1(hm), fp(r.HandoffOtherP99Ms))
				}
				if ideal := fifoIdeal(r); ideal > 0 && r.WaitP99Ms != nil {
					stall += fmt.Sprintf("; the wait's p99 was %.2f× the ideal", *r.WaitP99Ms/ideal)
				}
			}
			peers := ""
			if p, ok := peerOn[vd.store]; ok {
				peers = ", for " + p + " too (see max ÷ ideal in §2)"
			}
			key, why = "waitmax-"+vd.store, "**(2) wait max on "+vd.store+"**: the longest wait"+n+"; a single stall of the shared machine during a hand-off adds to every wait in progress"+stall+peers+"."
		case strings.HasPrefix(vd.target, "(2) hand-off") && strings.HasPrefix(vd.store, "postgres"):
			key = "pg-handoff"
			why = "**(2) PostgreSQL hand-off**: a hand-off is the release statement (committed without waiting for the WAL), the NOTIFY's delivery and the next waiter's acquire statement (with a synchronous commit); a hand-off inside the release measured the same (design.md, PostgreSQL stores); PostgreSQL 15 signals every listening backend of the database on each NOTIFY (16 here, one per worker's Client: each reads the notification queue, only the named waiter acts), and adding 16 idle listeners more raised the table-mode hand-off p50 by 0.6–0.85 ms in a throwaway test (2026-12-01, 2 runs each)"
			if c := x.get("cycle", "leasekit", vd.store); c != nil {
				why += fmt.Sprintf(". The server's statements are what varies between machines and runs: the uncontended cycle (two statements) took p50 %s ms in this run; in the run committed from 1cea91a (an earlier session) it took 0.54 ms (table) and the hand-off p50 was 1.38 ms (table) and 1.49 ms (advisory)", fp(c.P50Ms))
			}
			why += "."
		case strings.HasPrefix(vd.target, "(2) hand-off") && vd.store == "etcd":
			key, why = "etcd-handoff", "**(2) etcd hand-off**: both are one Raft write (with a WAL fsync) and a watch event; etcd Mutex's next holder then reads, leasekit's sends nothing, but its release transaction is larger (it compares the queue and puts the key for the next holder, where Mutex's deletes one key), and the watch reaches every Client's subscription (16 here), where each Mutex waiter watches its predecessor alone; what is left is of the size of this machine's run-to-run noise (see *What a hand-off costs* below)."
		case vd.store == "zookeeper" && strings.HasPrefix(vd.target, "(2)"):
			key, why = "zk-contention", "**(2) ZooKeeper contention**: leasekit's hand-off is zk.Lock's: the release's delete, the watch event on the waiter's predecessor, and one listing by the waiter, which then holds the key without a write (`Grant.FromQueue`); a queued Acquire costs as many requests (see requests / acq). What is left is the Client's own work (its release subscription's reader wakes the waiter: one goroutine hand-over more than zk.Lock's) and this machine's run-to-run noise: see the hand-off p99 and *hold as slept* in §2."
		case vd.store == "postgres-advisory" && strings.HasPrefix(vd.target, "(4)"):
			key, why = "adv-hb", "**(4) PostgreSQL advisory mode**: the store's leases of one TTL share one server session and are renewed in one statement on it; a miss here means more than one session (several TTLs) or a renewal retried in the window (see results.json's counters)."
		case vd.store == "zookeeper" && strings.HasPrefix(vd.target, "(4)"):
			key, why = "zk-hb", "**(4) ZooKeeper heartbeat**: with go-zookeeper v1.0.4 this target and (3) exclude each other. The library pings every session timeout / 3 whatever else it sends (its send loop's ticker is never reset), so at session timeout = TTL its ping alone is one request per renew interval (TTL / 3), and whatever a renewal writes adds to it. Renewing by the session alone, as zk.Lock does, writes nothing, but is not safe at session timeout = TTL: the session lives a session timeout past the server's last packet from the client, so a renewal that sends nothing at time t proves that the node lives until t + TTL only if the last acknowledged ping (up to a third of a session timeout old) leaves a TTL, i.e. session timeout ≥ 1.5 × TTL (0.67 pings per interval, and the pings must be watched on the wire); a crashed holder's node then lives that session timeout, ≥ 1.5 × TTL (≥ 3000 ms at §3's 2 s TTL, where zk-lock frees at its session's expiry, TTL plus the server's tick, and leasekit at its TTL). Even that holds only on a standalone server: in an ensemble a follower answers a client's pings itself and passes the session's touch to the leader, which alone expires sessions, at their next exchange; a follower cut off from the leader goes on answering pings until syncLimit × tickTime passes without the leader (10 s with ZooKeeper's sample zoo.cfg, 2.5 s here), while the leader expires the session after its timeout and deletes the node. An acknowledged ping thus proves nothing about the node; a request the leader orders does (a write, or sync), which is a request per interval on top of the library's ping. leasekit keeps the per-lease TTL, which also stops a process that keeps its session but stopped renewing one lease (a lost lease whose clean-up delete failed) from holding that key for the session's life, so every holder node is written each round: 10,000 such writes are 2 multis under jute.maxbuffer, plus the ping. This design's floor is 2 (one multi for up to about 5,000 leases of this size, plus the ping)."
			if hb := x.get("heartbeat", "leasekit", "zookeeper"); hb != nil {
				if _, ok := hb.Counters["zk_pings_per_interval"]; ok {
					reqs := counterF(hb, "zk_requests_per_interval")
					why += fmt.Sprintf(" Measured in this run (the benchmark's ZooKeeper wire counter tells the library's pings, xid −2, from the other writes): %s requests per interval are %s ping(s) and %s renewal multi(s) of %.0f bytes per lease (path and data of each node's setData in the multi); a multi is filled to %d KiB (jute.maxbuffer less a margin), so %d leases take %.0f multis",
						fp(hb.RoundTripsPerInterval), f1(counterF(hb, "zk_pings_per_interval")), f1(reqs), counterF(hb, "zk_bytes_per_lease_renewed"), zkMultiBudgetKiB, hb.Leases, reqs)
					if reqs > 1.5 {
						why += ": the third request is the second renewal multi, not a sync or a redundant call (the renewal sends none)"
					}
					why += "."
				}
			}
		case strings.HasPrefix(vd.target, "(8)"):
			key = "mk-" + vd.store
			lk, p := x.get("many-keys", "leasekit", vd.store), x.get("many-keys", peerOn[vd.store], vd.store)
			if vd.store == "redis" {
				p = x.get("many-keys", "redislock", "redis")
			}
			if lk != nil && p != nil {
				why = fmt.Sprintf("**(8) many keys on %s**: leasekit sent %s requests per operation (a pipeline or batch once) and %s messages, %s %s and %s; the Client sends concurrent acquisitions and releases of different keys together (coalesce.go), so round trips are not the limit; on two cores shared by client and server the work per operation is: the server calls of each script or transaction, and the client's own CPU",
					vd.store, fp(lk.RequestsPerOp), f1(counterF(lk, "messages_per_op")), p.System, fp(p.RequestsPerOp), f1(counterF(p, "messages_per_op")))
				if lk.ServerCPUUsPerOp != nil && p.ServerCPUUsPerOp != nil {
					why += fmt.Sprintf(" (server CPU per operation %s µs against %s µs", f1(*lk.ServerCPUUsPerOp), f1(*p.ServerCPUUsPerOp))
					ceiling := ""
					if a, b := counterF(lk, "client_cpu_us_per_op"), counterF(p, "client_cpu_us_per_op"); a > 0 && b > 0 {
						why += fmt.Sprintf(", client CPU %s µs against %s µs", f1(a), f1(b))
						ceiling = cpuCeiling(lk, p, *lk.ServerCPUUsPerOp+a, *p.ServerCPUUsPerOp+b)
					}
					why += ")" + ceiling
				}
				why += "."
			}
		case strings.HasPrefix(vd.target, "(9)"):
			key = "held-" + vd.store
			if r := x.get("held-100k", "leasekit", vd.store); r != nil {
				why = fmt.Sprintf("**(9) held leases on %s**: %s store calls per interval (RenewMany %s, Renew %s) for %s leases renewed per interval, %s round trips on the wire, %s leases lost (%s renewal failures, %s losses in the measuring window); memory %s B per lease (HeapAlloc + StackInuse), %s B counting the heap's partly used spans (HeapInuse + StackInuse), %d goroutines after acquiring.",
					vd.store, f1(counterF(r, "store_calls_per_interval")), f1(counterF(r, "renewmany_per_interval")), f1(counterF(r, "renew_calls_per_interval")),
					f1(counterF(r, "leases_renewed_per_interval")), fp(r.RoundTripsPerInterval), f1(counterF(r, "lost_total")), f1(counterF(r, "renew_failures_total")), f1(counterF(r, "lost_during_window")),
					fp(r.BytesPerLease), f1(counterF(r, "heap_inuse_bytes_per_lease")), int(counterF(r, "goroutines_after")))
				if counterF(r, "lost_total") > counterF(r, "lost_during_window") {
					why += fmt.Sprintf(" %s were lost before the window, while the leases were acquired (32 goroutines, their acquisitions coalesced, beside the renewal rounds on the same connections): the store renewed fewer leases per interval than the client held, and a call past its time limit fails all its leases (docs/design.md, \"Slow rounds\").",
						f1(counterF(r, "lost_total")-counterF(r, "lost_during_window")))
				}
			}
		case vd.store == "file" && strings.HasPrefix(vd.target, "(4)"):
			key, why = "file-hb", "**(4) file store**: no network; each renewal is local syscalls on the lease's own file (an flock and a pwrite)."
		default:
			key, why = vd.target+vd.store, "**"+vd.target+" on "+vd.store+"**: see *Reading the results* below."
		}
		if !seen[key] {
			seen[key] = true
			lines = append(lines, "- "+why)
		}
	}
	if len(lines) > 0 {
		w("Why the missed targets are missed:\n\n%s\n\n", strings.Join(lines, "\n"))
	}
}

// counterF returns r's counter name as a number (0 if absent).
func counterF(r *Result, name string) float64 {
	if r == nil {
		return 0
	}
	switch v := r.Counters[name].(type) {
	case float64:
		return v
	case int:
		return float64(v)
	case int64:
		return float64(v)
	}
	return 0
}

// heldMs is a contention result's hold as the workers held it (the mean
// measured hold), or the hold asked for when it was not measured.
func heldMs(r *Result) float64 {
	if h := counterF(r, "hold_mean_ms"); h > 0 {
		return h
	}
	return r.HoldMs
}

// manyKeysSection writes §8 (many-keys) and §9 (held-100k).
func manyKeysSection(w func(string, ...any), rs []Result, m Meta) {
	w("\n## 8. Many keys at once (issue #26)\n\n")
	w("%d goroutines of one process share one handle — leasekit: one `lease.Client`; redislock and redsync: one go-redis client; etcd-mutex: one session; zk-lock: one connection — and each acquires and releases keys of its own (%d each, in turn, of a set of %d: no two goroutines share a key) in a loop, for %.0f s per system after an unmeasured warm-up, one system after the other, grouped by store (each store's peers right after leasekit on it), each once the machine is nearly idle (under a tenth of its CPU busy for half a second, at most 15 s of waiting), so that the work a previous system left to a server is not counted against the next. An *op* is an acquisition and its release; latency is the op's. *Requests / op* are the client's requests on the wire (a pipeline once; gRPC stream messages as in §4; ZooKeeper socket writes, pings included), *messages / op* every request in them. *Server CPU / op*: Redis, a redis-server private to the scenario (`INFO cpu` used_cpu_user + used_cpu_sys); etcd and ZooKeeper, the server process's utime + stime from `/proc/<pid>/stat` (10 ms ticks; the process found by its listening port); PostgreSQL, the same summed over the backends of the Client's own pool (each connection's backend pid, recorded when it connects; the WAL writer, checkpointer and other background processes are not counted). Each key's first use creates its node's parent on ZooKeeper (zk-lock: a persistent node; zklease: a container node) and etcd-mutex keeps no state per key. TTL %.0f s.\n\n",
		m.Plan.MKWorkers, max(m.Plan.MKKeys/max(m.Plan.MKWorkers, 1), 1), m.Plan.MKKeys, m.Plan.MKDur.Seconds(), ms(mkTTL)/1000)
	w("| system | store | ops/s | p50 ms | p99 ms | max ms | requests / op | messages / op | server CPU µs / op | errors |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var errs []string
	for _, r := range rs {
		if r.Scenario != "many-keys" || r.Skipped != "" {
			continue
		}
		msgs := "–"
		if f, ok := r.Counters["messages_per_op"]; ok {
			msgs = f1(counterFloat(f))
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", r.System, r.Store, f1(r.OpsPerS), fp(r.P50Ms), fp(r.P99Ms), fp(r.MaxMs),
			fp(r.RequestsPerOp), msgs, fp(r.ServerCPUUsPerOp), r.Errors)
		if e, ok := r.Counters["last_error"].(string); ok {
			errs = append(errs, fmt.Sprintf("%s/%s: `%s`", r.System, r.Store, e))
		}
		if e, ok := r.Counters["server_cpu_error"].(string); ok {
			errs = append(errs, fmt.Sprintf("%s/%s server CPU not read: %s", r.System, r.Store, e))
		}
	}
	for _, e := range errs {
		w("\n- %s", e)
	}

	w("\n\n## 9. 100,000 held leases (issue #26)\n\n")
	w("§4's heartbeat scenario at %d leases held by one `lease.Client` in its own process, on Redis, PostgreSQL (table) and etcd, one store after the other, measured for %.0f s. *Renewal round* is the duration of each RenewMany call that ended in the window (one per renew interval once the leases converged into one batch). *Memory per lease* is as in §4 (`HeapAlloc + StackInuse` after GC, the least reading); `HeapInuse + StackInuse`, which counts the heap's partly used spans too, is beside it, and the most reading, with a round's buffers in flight, is `most_bytes_per_lease` in results.json.\n\n", m.Plan.HKLeases, m.Plan.HKDur.Seconds())
	w("| store | leases | round trips / interval | messages / interval | renewal round p50 ms | p99 ms | max ms | memory per lease | in-use per lease | client CPU | leases lost | acquire time |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.Scenario != "held-100k" || r.Skipped != "" {
			continue
		}
		num := func(k string) string {
			if f, ok := r.Counters[k]; ok {
				return f1(counterFloat(f))
			}
			return "–"
		}
		w("| %s | %d | %s | %s | %s | %s | %s | %s B | %s B | %s%% | %s | %s s |\n", r.Store, r.Leases, fp(r.RoundTripsPerInterval), num("wire_messages_per_interval"),
			fp(r.P50Ms), fp(r.P99Ms), fp(r.MaxMs), fp(r.BytesPerLease), num("heap_inuse_bytes_per_lease"), fp(r.CPUPercent), num("lost_total"), num("acquire_s"))
	}
}

// cpuCeiling says what the CPU per operation (client plus server, µs) of
// many-keys results lk and p allows: the two share two cores, so lk's ops/s
// can exceed p's by at most the ratio of their CPU per operation at equal
// use of the cores; it also gives the cores each kept busy.
func cpuCeiling(lk, p *Result, lkUs, pUs float64) string {
	busy := func(r *Result, us float64) string { return fmt.Sprintf("%.2f", r.OpsPerS*us/1e6) }
	return fmt.Sprintf("; ops/s can exceed %s's by the ratio of CPU per operation (%s µs against %s µs: %s×) at equal use of the two cores, and this run kept %s cores busy against %s's %s",
		p.System, f1(lkUs), f1(pUs), f1(pUs/lkUs), busy(lk, lkUs), p.System, busy(p, pUs))
}
