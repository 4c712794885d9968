// Unit tests of the checker on hand-made histories.

package verify

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

func TestHistoryUnknownAfterEnd(t *testing.T) {
	recs := []record{
		{W: 0, Op: "acquire", Call: 10, Ret: 20, Fence: 1, OK: true},
		{W: 0, Op: "read", Call: 30, Ret: 40, Fence: 1, OK: true},
		{W: 0, Op: "write", Call: 50, Ret: 60, Fence: 1, Value: 1, OK: true},
		// Begun after the nemesis ended (end = 100), cut short by the
		// workers' SIGTERM: outcome unknown.
		{W: 0, Op: "read", Call: 150, Fence: 1},
	}
	if res := porcupine.CheckOperations(model.ToModel(), history(recs, 100)); !res {
		t.Errorf("a history with an unknown operation begun after the run's end does not linearize")
	}
}

// Two readers share epoch 2, a writer takes fence 3; the good history
// linearizes, and a reader's read accepted after the writer's write is an
// interleaving, a stale read and not linearizable.
func TestReadWriteChecks(t *testing.T) {
	good := []record{
		{W: 0, Op: "acquire", Call: 10, Ret: 20, Fence: 1, OK: true},
		{W: 0, Op: "write", Call: 21, Ret: 22, Fence: 1, Value: 5, OK: true},
		{W: 1, Op: "acquire", Call: 30, Ret: 40, Fence: 2, OK: true, Shared: true},
		{W: 2, Op: "acquire", Call: 35, Ret: 45, Fence: 2, OK: true, Shared: true},
		{W: 1, Op: "read", Call: 50, Ret: 60, Fence: 2, Value: 5, OK: true, Shared: true},
		{W: 2, Op: "read", Call: 55, Ret: 65, Fence: 2, Value: 5, OK: true, Shared: true},
		{W: 3, Op: "acquire", Call: 50, Ret: 70, Fence: 3, OK: true},
		{W: 3, Op: "read", Call: 71, Ret: 72, Fence: 3, Value: 5, OK: true},
		{W: 3, Op: "write", Call: 73, Ret: 74, Fence: 3, Value: 6, OK: true},
		// The paused reader of epoch 2 is refused.
		{W: 1, Op: "read", Call: 80, Ret: 90, Fence: 2, Value: 6, Shared: true},
	}
	rep := &Report{Workload: WorkloadReadWrite}
	analyse(rep, append([]record(nil), good...))
	if !porcupine.CheckOperations(model.ToModel(), history(good, 100)) || !rep.OK() ||
		rep.StaleAccepted != 0 || rep.StaleRejected != 1 || rep.SharedEpochs != 1 || rep.SharedAcquisitions != 2 || rep.FenceRegressions != 0 {
		t.Errorf("good history: %+v", rep)
	}
	bad := append([]record(nil), good...)
	bad[len(bad)-1].OK = true // the stale read accepted
	rep = &Report{Workload: WorkloadReadWrite}
	analyse(rep, append([]record(nil), bad...))
	if porcupine.CheckOperations(model.ToModel(), history(bad, 100)) || rep.Interleavings != 1 || rep.StaleAccepted != 1 {
		t.Errorf("stale read accepted: linearizable or not caught: %+v", rep)
	}
	// A writer granted the readers' fence is a fence regression.
	reg := append([]record(nil), good...)
	reg[6].Fence = 2
	rep = &Report{Workload: WorkloadReadWrite}
	analyse(rep, append([]record(nil), reg...))
	if porcupine.CheckOperations(model.ToModel(), history(reg, 100)) || rep.FenceRegressions == 0 {
		t.Errorf("a writer sharing the readers' fence: not caught: %+v", rep)
	}
}

// A transfer history linearizes; a stale transfer accepted (a torn one, by
// a register that checked one key's fence only) breaks the sum and
// linearizability.
func TestTransferChecks(t *testing.T) {
	good := []record{
		{W: 0, Op: "acquire", Call: 10, Ret: 20, Fence: 1, Fence2: 1, OK: true},
		{W: 0, Op: "read", Call: 21, Ret: 22, Fence: 1, Fence2: 1, Value: 1000, Value2: 1000, OK: true},
		{W: 0, Op: "write", Call: 23, Ret: 24, Fence: 1, Fence2: 1, Value: 990, Value2: 1010, OK: true},
		{W: 1, Op: "acquire", Call: 30, Ret: 40, Fence: 2, Fence2: 2, OK: true},
		{W: 1, Op: "read", Call: 41, Ret: 42, Fence: 2, Fence2: 2, Value: 990, Value2: 1010, OK: true},
		{W: 1, Op: "write", Call: 43, Ret: 44, Fence: 2, Fence2: 2, Value: 995, Value2: 1005, OK: true},
		// The paused first holder's second transfer is refused whole.
		{W: 0, Op: "write", Call: 50, Ret: 60, Fence: 1, Fence2: 1, Value: 980, Value2: 1020},
		{W: 1, Op: "read", Call: 61, Ret: 62, Fence: 2, Fence2: 2, Value: 995, Value2: 1005, OK: true},
	}
	rep := &Report{Workload: WorkloadTransfer}
	analyse(rep, append([]record(nil), good...))
	if !porcupine.CheckOperations(pairModel.ToModel(), history(good, 100)) || !rep.OK() ||
		rep.Transfers != 2 || rep.StaleRejected != 1 || rep.SumViolations != 0 {
		t.Errorf("good history: %+v", rep)
	}
	bad := append([]record(nil), good...)
	bad[6].OK = true                        // the stale transfer landed on the first register only:
	bad[7].Value, bad[7].Value2 = 980, 1005 // the next read sees a broken sum
	rep = &Report{Workload: WorkloadTransfer}
	analyse(rep, append([]record(nil), bad...))
	if porcupine.CheckOperations(pairModel.ToModel(), history(bad, 100)) || rep.SumViolations != 1 || rep.StaleAccepted != 1 {
		t.Errorf("torn stale transfer: linearizable or not caught: %+v", rep)
	}
}

// Two AcquireAll calls that overlap, whose fences cross (the first got key
// a, lost it while it acquired key b, and the second took a and b in
// between): each key's fences still grow, and the history linearizes.
func TestTransferCrossingAcquisitions(t *testing.T) {
	recs := []record{
		{W: 0, Op: "acquire", Call: 10, Ret: 100, Fence: 1, Fence2: 6, OK: true, LostAtOnce: true},
		{W: 1, Op: "acquire", Call: 20, Ret: 90, Fence: 2, Fence2: 5, OK: true},
		{W: 1, Op: "read", Call: 91, Ret: 92, Fence: 2, Fence2: 5, Value: 1000, Value2: 1000, OK: true},
		{W: 0, Op: "read", Call: 101, Ret: 102, Fence: 1, Fence2: 6, Value: 1000, Value2: 1000},
	}
	rep := &Report{Workload: WorkloadTransfer}
	analyse(rep, append([]record(nil), recs...))
	if !porcupine.CheckOperations(pairModel.ToModel(), history(recs, 200)) || rep.AcquiredLost != 1 || rep.StaleRejected != 1 || !rep.OK() {
		t.Errorf("crossing AcquireAll fences: %+v", rep)
	}
}
