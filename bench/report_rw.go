// Report sections 6 and 7 (issue #23): read-heavy contention and
// AcquireAll.

package main

import (
	"fmt"
	"strings"
)

// role finds a read-heavy record by system, store and role.
func (x index) role(sys, store, role string) *Result {
	for i := range x {
		r := &x[i]
		if r.Scenario == "read-heavy" && r.System == sys && r.Store == store && r.Role == role && r.Skipped == "" {
			return r
		}
	}
	return nil
}

// rwBaseline names what leasekit's shared lease is compared with on store:
// etcd's RWMutex recipe where that Go peer exists, else leasekit's own
// exclusive lease.
func rwBaseline(store string) string {
	if store == "etcd" {
		return "etcd-rwmutex"
	}
	return "leasekit-exclusive"
}

// skippedIn lists scenario's skipped records as "system/store: why".
func skippedIn(rs []Result, scenario string) []string {
	var out []string
	for _, r := range rs {
		if r.Scenario == scenario && r.Skipped != "" {
			out = append(out, fmt.Sprintf("%s/%s: %s", r.System, r.Store, r.Skipped))
		}
	}
	return out
}

func readHeavySection(w func(string, ...any), rs []Result, x index, m Meta) {
	w("\n## 6. Read-heavy contention: %d readers + %d writers, one key, %s ms hold\n\n", rwReaders, rwWriters, f1(ms(m.Plan.Hold)))
	w("Each of %d readers and %d writers has its own connection/session/client (connected at the start of each of its system's phases and closed at the end, so that one system's connections are open at a time) and loops: acquire (readers shared, writers exclusive), hold %s ms (nanosleep, as in §2), release, acquire again at once. "+
		"leasekit's shared lease runs on every store whose `Caps.Shared` is true at run time; where a store has none yet, its row is missing and the skip is listed below the table. "+
		"It is compared with etcd's `experimental/recipes` RWMutex on etcd (the Go peer of Redisson's RReadWriteLock model: readers and writers queue by create revision, a writer waits for every earlier key, a reader for earlier writers; it gives no fence) "+
		"and, on the stores without a Go read-write lock, with leasekit's exclusive lease doing the same work (readers take it exclusively too): what a caller without read-write leases gets. "+
		"Systems run interleaved in rounds of 4 s as in §2, %.0f s each in total, after an unmeasured warm-up. "+
		"Unlike §2, an acquire call is never cut short when a round ends: the worker finishes it (bounded by %.0f s, counted as a *timeout*) and stops between calls, so *wait max* is the longest complete wait: the writers' is the starvation check. "+
		"*Most readers together* and *overlaps* come from the workers' own view (counted after the acquire call returns, before the release call): overlaps counts acquisitions that found a writer beside another holder, and must be 0. TTL 5 s.\n\n",
		rwReaders, rwWriters, f1(ms(m.Plan.Hold)), m.Plan.ContDur.Seconds(), attemptTimeout.Seconds())
	w("| system | store | reader acq/s | reader wait p50 | p99 | max | writer acq/s | writer wait p50 | p99 | max | most readers together | overlaps | timeouts | errors | reader acq/s vs baseline | writer acq/s vs baseline |\n" +
		"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.Scenario != "read-heavy" || r.Role != "reader" || r.Skipped != "" {
			continue
		}
		wr := x.role(r.System, r.Store, "writer")
		if wr == nil {
			continue
		}
		vr, vw := "", ""
		if r.System == "leasekit" {
			b := rwBaseline(r.Store)
			if br, bw := x.role(b, r.Store, "reader"), x.role(b, r.Store, "writer"); br != nil && bw != nil {
				vr = ratio(r.OpsPerS, br.OpsPerS) + " (vs " + b + ")"
				vw = ratio(wr.OpsPerS, bw.OpsPerS)
			}
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %.0f | %.0f | %d | %s | %s |\n", r.System, r.Store,
			f1(r.OpsPerS), fp(r.WaitP50Ms), fp(r.WaitP99Ms), fp(r.WaitMaxMs),
			f1(wr.OpsPerS), fp(wr.WaitP50Ms), fp(wr.WaitP99Ms), fp(wr.WaitMaxMs),
			counterF(&r, "max_readers_together"), counterF(&r, "overlaps"),
			counterF(&r, "timeouts")+counterF(wr, "timeouts"), r.Errors+wr.Errors, vr, vw)
	}
	w("\nLatencies in ms; one results.json record per role (`\"role\": \"reader\"` / `\"writer\"`, `clients` counting that role's workers).\n")
	if sk := skippedIn(rs, "read-heavy"); len(sk) > 0 {
		w("\nNot measured in this run:\n\n")
		for _, s := range sk {
			w("- %s\n", s)
		}
	}
}

func acquireAllSection(w func(string, ...any), rs []Result, x index, m Meta) {
	w("\n## 7. All or nothing: %d clients, %d keys of %d under contention, %s ms hold\n\n", m.Plan.Workers, allPick, allKeys, f1(ms(m.Plan.Hold)))
	w("Each client (its own connection/session/client, connected per phase as in §6) loops: pick %d distinct keys of a set of %d at random, in random order (so the clients' sets overlap and come in different orders), acquire them all, hold %s ms (nanosleep), release them all. "+
		"leasekit uses `Client.AcquireAll` (it waits in key order while holding keys, for at most the renew interval, then releases them and waits for the refused key holding nothing; a fence per key). "+
		"The peer is the naive approach a user of a Go Redis lock takes: redislock (ExponentialBackoff 4–512 ms per key, as in §2) on each key one by one, in sorted order so that it cannot deadlock, without fences; no Go peer has an all-or-nothing call. "+
		"On the other stores leasekit runs alone. Systems run interleaved in rounds of 4 s as in §2, %.0f s each in total, after an unmeasured warm-up; as in §6 an acquire call is never cut short when a round ends. "+
		"**Deadlock check:** every call is bounded by %.0f s; a call that reaches it counts as a *timeout* (its wait enters the percentiles as the bound) and the run must report 0 (a deadlock between clients would show as timeouts, not as a hung run). TTL 5 s.\n\n",
		allPick, allKeys, f1(ms(m.Plan.Hold)), m.Plan.ContDur.Seconds(), attemptTimeout.Seconds())
	w("| system | store | acq/s | wait p50 | wait p99 | wait max | timeouts | errors | per client min..max | acq/s vs peer |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	peer := x.get("acquire-all", "redislock-sorted", "redis")
	for _, r := range rs {
		if r.Scenario != "acquire-all" || r.Skipped != "" {
			continue
		}
		vp := ""
		if r.System == "leasekit" && r.Store == "redis" && peer != nil {
			vp = ratio(r.OpsPerS, peer.OpsPerS) + " (vs redislock-sorted)"
		}
		w("| %s | %s | %s | %s | %s | %s | %.0f | %d | %s..%s | %s |\n", r.System, r.Store, f1(r.OpsPerS), fp(r.WaitP50Ms), fp(r.WaitP99Ms), fp(r.WaitMaxMs),
			counterF(&r, "timeouts"), r.Errors, fi(r.PerWorkerMin), fi(r.PerWorkerMax), vp)
	}
	var bad []string
	for _, r := range rs {
		if r.Scenario == "acquire-all" && r.Skipped == "" && counterF(&r, "timeouts") > 0 {
			bad = append(bad, fmt.Sprintf("%s/%s: %.0f", r.System, r.Store, counterF(&r, "timeouts")))
		}
	}
	if len(bad) > 0 {
		w("\n**Calls that reached the %.0f s bound:** %s.\n", attemptTimeout.Seconds(), strings.Join(bad, "; "))
	} else {
		w("\nNo call reached the %.0f s bound: 0 timeouts.\n", attemptTimeout.Seconds())
	}
	w("\nLatencies in ms. Per-client acquisition counts:\n\n")
	for _, r := range rs {
		if r.Scenario == "acquire-all" && r.Skipped == "" {
			w("- %s/%s: %v\n", r.System, r.Store, r.PerWorker)
		}
	}
	if sk := skippedIn(rs, "acquire-all"); len(sk) > 0 {
		w("\nNot measured in this run:\n\n")
		for _, s := range sk {
			w("- %s\n", s)
		}
	}
}
