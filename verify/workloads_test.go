// The read-write and transfer workloads on every store the test servers
// provide: shorter runs than the register workload's (LEASE_VERIFY_DURATION
// lengthens them too), with the same faults.

package verify_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekit/lease/verify"
)

// TestReadWrite: readers (AcquireShared) and writers on one key and one
// fenced register, on the stores that keep shared holds (workloadStores).
func TestReadWrite(t *testing.T) { t.Parallel(); everyStore(t, verify.WorkloadReadWrite) }

// TestTransfer: transfers between two fenced registers under two keys held
// with AcquireAll; the sum never changes.
func TestTransfer(t *testing.T) { t.Parallel(); everyStore(t, verify.WorkloadTransfer) }

// TestTransferK8s: the transfer workload on the kube-apiserver (a test of
// its own, named for scripts/test's -run K8s step; no read-write workload:
// k8slease keeps no shared holds).
func TestTransferK8s(t *testing.T) {
	t.Parallel()
	faults := []string{verify.FaultKill, verify.FaultStop}
	// 15 s: each k8slease acquisition is several apiserver round trips (the
	// waiters' list too), and a run needs 10 to prove anything.
	rep := run(t, verify.Config{Store: k8sURL(t), TTL: time.Second, Duration: workloadDuration(t, 15*time.Second),
		Faults: faults, Workload: verify.WorkloadTransfer})
	checkWorkload(t, rep, faults...)
}

// workloadDuration is each workload run's: LEASE_VERIFY_DURATION, default
// 8s (at least min).
func workloadDuration(t *testing.T, min time.Duration) time.Duration {
	if os.Getenv("LEASE_VERIFY_DURATION") != "" {
		return max(runDuration(t), min)
	}
	return max(8*time.Second, min)
}

// storeCase is one store's configuration for the workloads and the faults
// its run must have injected.
type storeCase struct {
	name   string
	setup  func(t *testing.T) verify.Config
	faults []string
}

var workloadStores = []storeCase{
	{"File", func(t *testing.T) verify.Config {
		// Latency and cuts need a TCP store: kill and stop in turn.
		return verify.Config{Store: "file://" + filepath.Join(t.TempDir(), "leases"), TTL: 500 * time.Millisecond,
			Duration: workloadDuration(t, 0), Faults: []string{verify.FaultKill, verify.FaultStop}}
	}, []string{verify.FaultKill, verify.FaultStop}},
	{"Redis", func(t *testing.T) verify.Config {
		srv := startRedis(t)
		// Every fault in turn, the restart second (it needs no holder): on
		// a loaded machine the last of the five may not come in 13s.
		return verify.Config{Store: srv.url(), TTL: 500 * time.Millisecond,
			Restart: srv.restart, Duration: workloadDuration(t, 13*time.Second),
			Faults: []string{verify.FaultKill, verify.FaultRestart, verify.FaultStop, verify.FaultCut, verify.FaultLatency}}
	}, []string{verify.FaultKill, verify.FaultRestart, verify.FaultStop, verify.FaultCut}},
	{"Postgres", func(t *testing.T) verify.Config { return postgresCase(t, "") },
		[]string{verify.FaultKill, verify.FaultStop, verify.FaultCut}},
	{"PostgresAdvisory", func(t *testing.T) verify.Config { return postgresCase(t, "advisory") },
		[]string{verify.FaultKill, verify.FaultStop, verify.FaultCut}},
	{"Etcd", func(t *testing.T) verify.Config {
		// etcd's minimum TTL is 2s: the faults come every 4-6s, and the
		// holds are shorter, for enough acquisitions.
		return verify.Config{Store: etcdURL(t), TTL: 2 * time.Second,
			Duration: workloadDuration(t, 15*time.Second), Hold: 1}
	}, []string{verify.FaultKill}},
	{"ZooKeeper", func(t *testing.T) verify.Config {
		// A paused holder's session outlives it by 4s: a longer run, shorter
		// holds.
		return verify.Config{Store: zkURL(t), TTL: time.Second,
			Duration: workloadDuration(t, 15*time.Second), Hold: 1}
	}, []string{verify.FaultKill, verify.FaultStop}},
}

// postgresCase: the shared PostgreSQL server in mode ("" for table mode),
// with the register rows in PostgreSQL (the transfer's two rows are
// checked and written in one transaction).
func postgresCase(t *testing.T, mode string) verify.Config {
	return verify.Config{Store: postgresURL(t, mode), Register: postgresRegister(t, "wl-"+mode), TTL: 500 * time.Millisecond,
		Duration: workloadDuration(t, 12*time.Second)}
}

// exclusiveStores keep no shared holds: they run the transfer workload only.
var exclusiveStores = []storeCase{
	{"NATS", func(t *testing.T) verify.Config {
		return verify.Config{Store: natsURL(t), TTL: 500 * time.Millisecond, Duration: workloadDuration(t, 0)}
	}, []string{verify.FaultKill, verify.FaultStop}},
	{"MySQL", func(t *testing.T) verify.Config {
		return verify.Config{Store: mysqlURL(t, "table"), TTL: 500 * time.Millisecond, Duration: workloadDuration(t, 12*time.Second)}
	}, []string{verify.FaultKill, verify.FaultStop, verify.FaultCut}},
	{"MySQLGetLock", func(t *testing.T) verify.Config {
		return verify.Config{Store: mysqlURL(t, "getlock"), TTL: time.Second, Duration: workloadDuration(t, 15*time.Second),
			Faults: []string{verify.FaultKill, verify.FaultStop, verify.FaultCut}}
	}, []string{verify.FaultKill, verify.FaultStop, verify.FaultCut}},
}

func everyStore(t *testing.T, workload string) {
	stores := workloadStores
	if workload == verify.WorkloadTransfer {
		stores = append(stores[:len(stores):len(stores)], exclusiveStores...)
	}
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			cfg := sc.setup(t)
			cfg.Workload = workload
			rep := run(t, cfg)
			checkWorkload(t, rep, sc.faults...)
		})
	}
}

// checkWorkload is check plus the workload's own properties.
func checkWorkload(t *testing.T, rep *verify.Report, faults ...string) {
	t.Helper()
	check(t, rep, faults...)
	switch rep.Workload {
	case verify.WorkloadReadWrite:
		if rep.Interleavings != 0 {
			t.Errorf("%d interleavings of writers with readers of an older epoch, want 0", rep.Interleavings)
		}
		if rep.SharedAcquisitions == 0 || rep.Acquisitions == rep.SharedAcquisitions || rep.SharedEpochs == 0 {
			t.Errorf("%d acquisitions, %d of readers, %d shared epochs: want readers sharing and writers",
				rep.Acquisitions, rep.SharedAcquisitions, rep.SharedEpochs)
		}
	case verify.WorkloadTransfer:
		if rep.SumViolations != 0 || rep.FinalSum != 2000 {
			t.Errorf("%d sum violations, final sum %d; want 0 and 2000", rep.SumViolations, rep.FinalSum)
		}
		if rep.Transfers < 5 {
			t.Errorf("only %d transfers", rep.Transfers)
		}
	default:
		t.Errorf("workload %q, want %s or %s", rep.Workload, verify.WorkloadReadWrite, verify.WorkloadTransfer)
	}
}

// TestTransferWithoutFencing is the transfer workload's control: registers
// that accept every fence let paused holders' transfers land, and the
// checker must notice.
func TestTransferWithoutFencing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rep := run(t, verify.Config{Store: "file://" + filepath.Join(dir, "leases"), TTL: 300 * time.Millisecond,
		Workload: verify.WorkloadTransfer, Register: "unfenced:" + filepath.Join(dir, "register"),
		Faults: []string{verify.FaultStop}, Duration: workloadDuration(t, 0)})
	if rep.StaleAccepted == 0 || rep.Linearizable || rep.OK() {
		t.Fatalf("without fencing: stale accepted %d, linearizable %v, violations %v; want stale transfers accepted and caught",
			rep.StaleAccepted, rep.Linearizable, rep.Violations)
	}
}

// TestReadWriteWithoutFencing is the read-write workload's control: a
// register that accepts every fence lets paused readers read after a
// writer, and the checker must notice.
func TestReadWriteWithoutFencing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := "file://" + filepath.Join(dir, "leases")
	rep := run(t, verify.Config{Store: store, TTL: 300 * time.Millisecond,
		Workload: verify.WorkloadReadWrite, Register: "unfenced:" + filepath.Join(dir, "register"),
		Faults: []string{verify.FaultStop}, Duration: workloadDuration(t, 0)})
	if rep.StaleAccepted == 0 || rep.Linearizable || rep.OK() {
		t.Fatalf("without fencing: stale accepted %d (interleavings %d), linearizable %v, violations %v; want stale operations accepted and caught",
			rep.StaleAccepted, rep.Interleavings, rep.Linearizable, rep.Violations)
	}
}
