// Long runs (LEASE_VERIFY_LONG, e.g. 30m): every fault kind a store
// supports, with the worker processes' RSS, goroutines and open file
// descriptors sampled every 10 s and checked for growth. Not in CI; the
// smoke test of the sampling and the growth check is.

package verify_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/zktest"
	"github.com/leasekit/lease/verify"
)

// longStores: each store with every fault kind it supports. Latency and cuts
// need a single-host TCP URL (the proxy); restarts a private server of the
// harness. TTL 1 s (2 s on the etcd cluster and the ZooKeeper ensemble, as
// in their CI runs): a long run shares the machine with the other stores'.
var longStores = []storeCase{
	{"File", func(t *testing.T) verify.Config {
		return verify.Config{Store: "file://" + filepath.Join(t.TempDir(), "leases"), TTL: time.Second,
			Faults: []string{verify.FaultKill, verify.FaultStop, verify.FaultBreak}}
	}, []string{verify.FaultKill, verify.FaultStop, verify.FaultBreak}},
	{"Redis", func(t *testing.T) verify.Config {
		srv := startRedis(t)
		return verify.Config{Store: srv.url(), TTL: time.Second, Restart: srv.restart, Faults: allFaults(true)}
	}, allFaults(true)},
	{"Postgres", func(t *testing.T) verify.Config {
		cfg := postgresCase(t, "")
		cfg.TTL, cfg.Faults = time.Second, allFaults(false)
		return cfg
	}, allFaults(false)},
	{"PostgresAdvisory", func(t *testing.T) verify.Config {
		cfg := postgresCase(t, "advisory")
		cfg.TTL, cfg.Faults = time.Second, allFaults(false)
		return cfg
	}, allFaults(false)},
	{"PostgresRestart", func(t *testing.T) verify.Config {
		spec := postgresRegister(t, "longpg-")
		p := startPrivatePG(t)
		return verify.Config{Store: p.DSN(), Register: spec, TTL: time.Second, Restart: p.restart, Faults: allFaults(true)}
	}, allFaults(true)},
	{"MySQL", func(t *testing.T) verify.Config {
		return verify.Config{Store: mysqlURL(t, "table"), TTL: time.Second, Faults: allFaults(false)}
	}, allFaults(false)},
	{"MySQLGetLock", func(t *testing.T) verify.Config {
		return verify.Config{Store: mysqlURL(t, "getlock"), TTL: time.Second, Faults: allFaults(false)}
	}, allFaults(false)},
	{"EtcdCluster", func(t *testing.T) verify.Config {
		c := startEtcdCluster(t)
		return verify.Config{Store: "etcd://" + strings.Join(c.endpoints(), ","), TTL: 2 * time.Second, Restart: c.restart,
			Faults: []string{verify.FaultRestart, verify.FaultKill, verify.FaultStop, verify.FaultBreak}}
	}, []string{verify.FaultRestart, verify.FaultKill, verify.FaultStop, verify.FaultBreak}},
	{"ZooKeeperEnsemble", func(t *testing.T) verify.Config {
		e := zktest.Start(t)
		r := &zkRestarter{t: t, e: e, killed: map[string]int{}}
		return verify.Config{Store: "zk://" + strings.Join(e.Addrs(), ",") + "?session_timeout=8s", TTL: 2 * time.Second,
			Restart: r.restart, Faults: []string{verify.FaultRestart, verify.FaultKill, verify.FaultStop, verify.FaultBreak}}
	}, []string{verify.FaultRestart, verify.FaultKill, verify.FaultStop, verify.FaultBreak}},
	{"NATS", func(t *testing.T) verify.Config {
		return verify.Config{Store: natsURL(t), TTL: time.Second, Faults: allFaults(false)}
	}, allFaults(false)},
	{"K8s", func(t *testing.T) verify.Config {
		return verify.Config{Store: k8sURL(t), TTL: time.Second,
			Faults: []string{verify.FaultKill, verify.FaultStop, verify.FaultBreak}}
	}, []string{verify.FaultKill, verify.FaultStop, verify.FaultBreak}},
}

// allFaults: every fault kind of a single-host TCP store, with restarts.
func allFaults(restart bool) []string {
	fs := []string{verify.FaultKill, verify.FaultStop, verify.FaultLatency, verify.FaultCut, verify.FaultBreak}
	if restart {
		fs = append(fs, verify.FaultRestart)
	}
	return fs
}

// TestLongRun runs every store of longStores for LEASE_VERIFY_LONG (skipped
// when unset), sampling the workers every 10 s; workers 0 and 1 are never
// killed, so their samples span the run. One store alone:
// -run 'TestLongRun/Redis$'.
func TestLongRun(t *testing.T) {
	s := os.Getenv("LEASE_VERIFY_LONG")
	if s == "" {
		t.Skip("LEASE_VERIFY_LONG is not set (e.g. 30m): the long runs are not part of CI")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("LEASE_VERIFY_LONG: %v", err)
	}
	for _, sc := range longStores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			cfg := sc.setup(t)
			cfg.Duration, cfg.Sample, cfg.Survivors = d, 10*time.Second, 2
			rep := run(t, cfg)
			check(t, rep, sc.faults...)
			for _, p := range rep.Trends {
				t.Logf("resources: %s", p)
			}
			if d >= 5*time.Minute && len(rep.Trends) < cfg.Survivors {
				t.Errorf("%d processes judged for growth, want at least the %d survivors", len(rep.Trends), cfg.Survivors)
			}
		})
	}
}

// TestSampling is the CI-size smoke of the long runs' sampling: a short run
// on the file store must have sampled every worker slot, with plausible
// numbers, and never killed the survivors. (Its assertions hold on a loaded
// machine, where the workers may take seconds to start.)
func TestSampling(t *testing.T) {
	t.Parallel()
	rep := run(t, verify.Config{Store: "file://" + filepath.Join(t.TempDir(), "leases"), TTL: 300 * time.Millisecond,
		Duration: 10 * time.Second, Sample: 300 * time.Millisecond, Survivors: 2,
		Faults: []string{verify.FaultKill, verify.FaultStop}})
	if !rep.OK() || rep.Acquisitions == 0 {
		t.Errorf("violations %v, %d acquisitions", rep.Violations, rep.Acquisitions)
	}
	perWorker := map[int]map[int]int{} // worker -> pid -> samples
	for _, s := range rep.Samples {
		if s.RSS <= 0 || s.FDs < 3 || s.Goroutines < 2 {
			t.Errorf("implausible sample %+v: want RSS > 0, at least 3 fds (stdio) and 2 goroutines", s)
		}
		if perWorker[s.W] == nil {
			perWorker[s.W] = map[int]int{}
		}
		perWorker[s.W][s.PID]++
	}
	for w := 0; w < 4; w++ {
		if len(perWorker[w]) == 0 {
			t.Errorf("worker %d was never sampled", w)
		}
	}
	for w := 0; w < 2; w++ {
		if len(perWorker[w]) != 1 {
			t.Errorf("survivor %d ran as %d processes, want 1 (never killed)", w, len(perWorker[w]))
		}
		for pid, n := range perWorker[w] {
			if n < 3 {
				t.Errorf("survivor %d (pid %d): %d samples in 10 s at 300 ms, want at least 3", w, pid, n)
			}
		}
	}
	if rep.Faults[verify.FaultKill] == 0 {
		t.Logf("no kill in this run (loaded machine?): the survivors were not put to the test")
	}
	// Too short for the default rule's warm-up: nothing judged, nothing grew.
	if len(rep.Trends) != 0 {
		t.Errorf("%d processes judged in a 10 s run, want 0 (two-minute warm-up)", len(rep.Trends))
	}
}

// TestCheckGrowth checks the growth rule on synthetic series: noise, a
// warm-up climb and a spike pass; a steady leak of goroutines, descriptors
// or memory fails; a process that lived too short is not judged.
func TestCheckGrowth(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	series := func(pid, n int, f func(i int) verify.Sample) []verify.Sample {
		var ss []verify.Sample
		for i := 0; i < n; i++ {
			s := f(i)
			s.W, s.PID, s.At = pid%10, pid, t0.Add(time.Duration(i)*10*time.Second)
			ss = append(ss, s)
		}
		return ss
	}
	const mib = 1 << 20
	flat := func(i int) verify.Sample {
		return verify.Sample{RSS: int64(20*mib + (i%5)*mib), Goroutines: 10 + i%4, FDs: 12 + i%3}
	}
	var all []verify.Sample
	all = append(all, series(100, 180, flat)...)                   // 30 min of noise
	all = append(all, series(101, 180, func(i int) verify.Sample { // a warm-up climb, then flat, with one spike
		s := flat(i)
		if i < 12 {
			s.RSS, s.Goroutines = int64(5*mib+i*mib), 3+i
		}
		if i == 150 {
			s.Goroutines, s.FDs, s.RSS = 80, 60, 90*mib
		}
		return s
	})...)
	all = append(all, series(102, 180, func(i int) verify.Sample { // one goroutine leaked a minute
		s := flat(i)
		s.Goroutines += i / 6
		return s
	})...)
	all = append(all, series(103, 180, func(i int) verify.Sample { // one fd leaked every 30 s
		s := flat(i)
		s.FDs += i / 3
		return s
	})...)
	all = append(all, series(104, 180, func(i int) verify.Sample { // 300 KiB a sample (1.8 MiB a minute)
		s := flat(i)
		s.RSS += int64(i) * 300 << 10
		return s
	})...)
	all = append(all, series(105, 15, func(i int) verify.Sample { // killed after 2.5 min: too short
		s := flat(i)
		s.Goroutines += 10 * i
		return s
	})...)
	trends := verify.CheckGrowth(all, verify.DefaultGrowth)
	got := map[int]verify.ProcessTrend{}
	for _, p := range trends {
		got[p.PID] = p
	}
	if len(trends) != 5 {
		t.Fatalf("%d processes judged, want 5 (not the short-lived 105): %v", len(trends), trends)
	}
	want := map[int][3]bool{ // RSS, goroutines, fds grew
		100: {false, false, false},
		101: {false, false, false},
		102: {false, true, false},
		103: {false, false, true},
		104: {true, false, false},
	}
	for pid, w := range want {
		p := got[pid]
		if [3]bool{p.RSS.Grew, p.Goroutines.Grew, p.FDs.Grew} != w {
			t.Errorf("pid %d: grew RSS/goroutines/fds = %v/%v/%v, want %v: %s", pid, p.RSS.Grew, p.Goroutines.Grew, p.FDs.Grew, w, p)
		}
		if p.Samples != 168 || p.Span != 167*10*time.Second {
			t.Errorf("pid %d: %d samples over %v, want 168 over 27m50s (after the 2 min warm-up)", pid, p.Samples, p.Span)
		}
		if p.Grew() != (w[0] || w[1] || w[2]) || strings.Contains(p.String(), "GREW") != p.Grew() {
			t.Errorf("pid %d: Grew() %v, String %q", pid, p.Grew(), p)
		}
	}
	if p := got[100]; p.Goroutines.First < 10 || p.Goroutines.First > 13 || p.FDs.Max != 14 || p.RSS.Max != 24*mib {
		t.Errorf("pid 100: %s", p)
	}
}
