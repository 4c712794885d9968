// Checking a history: porcupine against a fenced lock + register model, and
// the counts of the report.

package verify

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// opInput and opOutput are porcupine's view of one operation.
type opInput struct {
	Op     string // acquire, read, write
	Shared bool   // a reader's acquisition (read-write workload)
	Fence  uint64
	Value  int64 // write: the value written
	Fence2 uint64
	Value2 int64 // transfer: the second register's fence and value
	Key    int   // transfer acquisitions: 0 for the first key, 1 for the second
}

type opOutput struct {
	OK      bool // acquire: granted; read/write: accepted by the register
	Unknown bool // the outcome was not seen (error, killed)
	Fence   uint64
	Value   int64 // read: the value returned
	Fence2  uint64
	Value2  int64 // transfer: the second key's fence, the second register's value
}

// modelState: the largest fence granted (and whether a reader's), the
// register's fence and value.
type modelState struct {
	Granted       uint64
	GrantedShared bool
	Fence         uint64
	Value         int64
}

// model is a fenced read-write lock and register: an exclusive
// acquisition's fence is larger than all earlier ones; a shared one's is
// larger, or equal to the largest when that was a reader's too (it joins
// the read epoch); a read or write is accepted iff its fence is at least
// the register's (and then raises it); a read returns the value.
var model = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{modelState{}} },
	Step: func(state, input, output interface{}) []interface{} {
		s, in, out := state.(modelState), input.(opInput), output.(opOutput)
		switch in.Op {
		case "acquire":
			if out.Fence < s.Granted || out.Fence == s.Granted && !(in.Shared && s.GrantedShared) {
				return nil
			}
			s.Granted, s.GrantedShared = out.Fence, in.Shared
			return []interface{}{s}
		}
		applies := in.Fence >= s.Fence
		next := s
		if applies {
			next.Fence = in.Fence
			if in.Op == "write" {
				next.Value = in.Value
			}
		}
		switch {
		case out.Unknown && applies:
			return []interface{}{s, next} // it may or may not have happened
		case out.Unknown:
			return []interface{}{s}
		case out.OK != applies:
			return nil
		case in.Op == "read" && out.OK && out.Value != s.Value:
			return nil
		}
		return []interface{}{next}
	},
	DescribeOperation: func(input, output interface{}) string {
		in, iok := input.(opInput)
		out, ook := output.(opOutput)
		if !iok || !ook {
			return fmt.Sprintf("%v -> %v", input, output)
		}
		res := "rejected"
		switch {
		case out.Unknown:
			res = "?"
		case out.OK && in.Op == "read":
			res = fmt.Sprint(out.Value)
		case out.OK:
			res = "ok"
		}
		switch in.Op {
		case "acquire":
			if in.Shared {
				return fmt.Sprintf("acquire shared -> fence %d", out.Fence)
			}
			return fmt.Sprintf("acquire -> fence %d", out.Fence)
		case "write":
			return fmt.Sprintf("write(fence %d, %d) -> %s", in.Fence, in.Value, res)
		}
		return fmt.Sprintf("read(fence %d) -> %s", in.Fence, res)
	},
	DescribeState: func(state interface{}) string {
		s, ok := state.(modelState)
		if !ok {
			return fmt.Sprint(state)
		}
		return fmt.Sprintf("granted %d; register fence %d value %d", s.Granted, s.Fence, s.Value)
	},
}

// history turns worker records into porcupine operations. An operation whose
// outcome is unknown may take effect at any time after its call: it
// completes after end and after every recorded time. (Workers run on for a
// moment after end, until their SIGTERM: an operation begun then and cut
// short by it would otherwise complete before its call, which porcupine
// cannot linearize.)
func history(recs []record, end int64) []porcupine.Operation {
	last := end
	for _, r := range recs {
		last = max(last, r.Call, r.Ret)
	}
	var ops []porcupine.Operation
	for _, r := range recs {
		var in opInput
		var out opOutput
		switch r.Op {
		case "acquire":
			in, out = opInput{Op: "acquire", Shared: r.Shared}, opOutput{OK: true, Fence: r.Fence, Fence2: r.Fence2}
		case "read":
			in = opInput{Op: "read", Fence: r.Fence, Fence2: r.Fence2}
			out = opOutput{OK: r.OK, Value: r.Value, Value2: r.Value2}
		case "write":
			in, out = opInput{Op: "write", Fence: r.Fence, Value: r.Value, Fence2: r.Fence2, Value2: r.Value2}, opOutput{OK: r.OK}
		default:
			continue
		}
		ret := r.Ret
		if ret == 0 {
			out.Unknown, ret = true, last+1
		}
		if r.Op == "acquire" && r.Fence2 != 0 {
			// AcquireAll: one acquisition per key, each somewhere in the
			// call. (A set need not be granted at one instant: the first
			// key may be lost, and taken by another, while the second is
			// acquired — see Report.AcquiredLost.)
			ops = append(ops, porcupine.Operation{ClientId: r.W, Input: opInput{Op: "acquire", Key: 1}, Call: r.Call,
				Output: opOutput{OK: true, Fence: r.Fence2}, Return: ret})
		}
		ops = append(ops, porcupine.Operation{ClientId: r.W, Input: in, Call: r.Call, Output: out, Return: ret})
	}
	return ops
}

// analyse fills the counts of rep from the records.
func analyse(rep *Report, recs []record) {
	sort.Slice(recs, func(i, j int) bool { return recs[i].Call < recs[j].Call })
	type acq struct {
		fence, fence2 uint64 // fence2: the second key's (transfer)
		at            int64  // completion
		shared        bool   // a reader's
	}
	var acqs []acq
	var accepted []acq // accepted register operations: fences, completion
	epochs := map[uint64]int{}
	for _, r := range recs {
		switch r.Op {
		case "acquire":
			rep.Acquisitions++
			if r.LostAtOnce {
				rep.AcquiredLost++
			}
			acqs = append(acqs, acq{r.Fence, r.Fence2, r.Ret, r.Shared})
			if r.Shared {
				rep.SharedAcquisitions++
				epochs[r.Fence]++
			}
		case "read", "write":
			rep.Operations++
			if r.OK && r.Ret != 0 {
				accepted = append(accepted, acq{r.Fence, r.Fence2, r.Ret, r.Shared})
				if rep.Workload == WorkloadTransfer {
					if r.Op == "write" {
						rep.Transfers++
					} else if sum := r.Value + r.Value2; sum != 2*transferInitial {
						rep.SumViolations++
						if rep.SumViolations <= 3 {
							rep.Violations = append(rep.Violations, fmt.Sprintf("worker %d (pid %d) read %d + %d = %d with fences %d, %d; want a sum of %d",
								r.W, r.PID, r.Value, r.Value2, sum, r.Fence, r.Fence2, 2*transferInitial))
						}
					}
				}
			}
		}
	}
	for _, n := range epochs {
		if n >= 2 {
			rep.SharedEpochs++
		}
	}
	// newer: a's fence (either key's) is larger than r's.
	newer := func(a acq, r record) bool { return a.fence > r.Fence || a.fence2 > r.Fence2 }
	overlapping := map[[2]uint64]bool{}
	for _, r := range recs {
		if r.Op != "read" && r.Op != "write" {
			continue
		}
		// Superseded: a newer holder had acquired before this op began.
		var supersededBy uint64
		for _, a := range acqs {
			if newer(a, r) && a.at < r.Call && (supersededBy == 0 || a.fence < supersededBy) {
				supersededBy = a.fence
			}
		}
		// Stale: a newer fence had already been accepted by the register.
		stale := false
		for _, a := range accepted {
			if newer(a, r) && a.at < r.Call {
				stale = true
				break
			}
		}
		if supersededBy != 0 {
			rep.UnfencedLetThrough++
			overlapping[[2]uint64{r.Fence, supersededBy}] = true
		}
		switch {
		case r.Ret == 0:
			rep.Unknown++
		case !r.OK:
			rep.StaleRejected++
		case stale:
			rep.StaleAccepted++
		}
	}
	rep.OverlappingHolders = len(overlapping)

	// Read-write: a writer's accepted operations never interleave with those
	// of readers of an older epoch: none of theirs is accepted after one of
	// the writer's completed.
	if rep.Workload == WorkloadReadWrite {
		pairs := map[[2]uint64]bool{}
		for _, x := range recs {
			if !x.Shared || x.Op != "read" || !x.OK || x.Ret == 0 {
				continue
			}
			for _, w := range accepted {
				if !w.shared && w.fence > x.Fence && w.at < x.Call && !pairs[[2]uint64{w.fence, x.Fence}] {
					pairs[[2]uint64{w.fence, x.Fence}] = true
					rep.Interleavings++
					if rep.Interleavings <= 3 {
						rep.Violations = append(rep.Violations, fmt.Sprintf("worker %d (pid %d), a reader of epoch %d, had a read accepted after the writer with fence %d had an operation accepted", x.W, x.PID, x.Fence, w.fence))
					}
				}
			}
		}
	}

	// Fences must grow in real time: an acquisition that began after another
	// completed has a larger fence (for each key), or the same when both are
	// readers of one epoch. (porcupine checks this too; this names the
	// culprits.)
	byRet := append([]acq(nil), acqs...)
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].at < byRet[j].at })
	for _, r := range recs {
		if r.Op != "acquire" {
			continue
		}
		i := sort.Search(len(byRet), func(i int) bool { return byRet[i].at >= r.Call })
		for _, a := range byRet[:i] {
			ok := a.fence < r.Fence || a.fence == r.Fence && a.shared && r.Shared
			if r.Fence2 != 0 && a.fence2 >= r.Fence2 {
				ok = false
			}
			if !ok {
				rep.FenceRegressions++
				if rep.FenceRegressions <= 3 {
					rep.Violations = append(rep.Violations, fmt.Sprintf("worker %d (pid %d) acquired fence %d after fence %d had been granted", r.W, r.PID, r.Fence, a.fence))
				}
				break
			}
		}
	}
}

// failovers measures, for each holder death (kill -9 or SIGSTOP) at time t of
// a holder with fence f, the time until another holder acquired a fence > f.
func failovers(rep *Report, recs []record, deaths []death, ttl time.Duration, grace time.Duration) {
	for _, d := range deaths {
		next := int64(math.MaxInt64)
		for _, r := range recs {
			if r.Op == "acquire" && r.Fence > d.fence && r.Ret >= d.at && r.Ret < next {
				next = r.Ret
			}
		}
		if next == math.MaxInt64 {
			if d.at+int64(ttl+grace) < d.runEnd {
				rep.StuckLeases++
				rep.Violations = append(rep.Violations, fmt.Sprintf("after the %s of the holder with fence %d, nobody acquired the key in the remaining %v", d.kind, d.fence, time.Duration(d.runEnd-d.at).Round(time.Millisecond)))
			}
			continue
		}
		fo := time.Duration(next - d.at)
		if fo > rep.LongestFailover {
			rep.LongestFailover = fo
		}
		if fo > ttl+grace {
			rep.StuckLeases++
			rep.Violations = append(rep.Violations, fmt.Sprintf("after the %s of the holder with fence %d, the next holder came %v later (TTL %v)", d.kind, d.fence, fo.Round(time.Millisecond), ttl))
		}
	}
}

type death struct {
	kind   string
	fence  uint64
	at     int64
	runEnd int64
}

// pairState: the largest fences granted for the two keys, the two
// registers' fences and values.
type pairState struct {
	GrantedA, GrantedB uint64
	FenceA, FenceB     uint64
	ValueA, ValueB     int64
}

// pairModel is the transfer workload's: two fenced locks acquired together
// (each key's fence larger than all its earlier ones) and two fenced
// registers read and written together, an operation accepted iff each fence
// is at least its register's (and then raising both), refused whole
// otherwise; a read returns both values.
var pairModel = porcupine.NondeterministicModel{
	Init: func() []interface{} {
		return []interface{}{pairState{ValueA: transferInitial, ValueB: transferInitial}}
	},
	Step: func(state, input, output interface{}) []interface{} {
		s, in, out := state.(pairState), input.(opInput), output.(opOutput)
		if in.Op == "acquire" {
			if in.Key == 0 && out.Fence > s.GrantedA {
				s.GrantedA = out.Fence
				return []interface{}{s}
			}
			if in.Key == 1 && out.Fence > s.GrantedB {
				s.GrantedB = out.Fence
				return []interface{}{s}
			}
			return nil
		}
		applies := in.Fence >= s.FenceA && in.Fence2 >= s.FenceB
		next := s
		if applies {
			next.FenceA, next.FenceB = in.Fence, in.Fence2
			if in.Op == "write" {
				next.ValueA, next.ValueB = in.Value, in.Value2
			}
		}
		switch {
		case out.Unknown && applies:
			return []interface{}{s, next}
		case out.Unknown:
			return []interface{}{s}
		case out.OK != applies:
			return nil
		case in.Op == "read" && out.OK && (out.Value != s.ValueA || out.Value2 != s.ValueB):
			return nil
		}
		return []interface{}{next}
	},
	DescribeOperation: func(input, output interface{}) string {
		in, iok := input.(opInput)
		out, ook := output.(opOutput)
		if !iok || !ook {
			return fmt.Sprintf("%v -> %v", input, output)
		}
		res := "rejected"
		switch {
		case out.Unknown:
			res = "?"
		case out.OK && in.Op == "read":
			res = fmt.Sprintf("%d, %d", out.Value, out.Value2)
		case out.OK:
			res = "ok"
		}
		switch in.Op {
		case "acquire":
			return fmt.Sprintf("acquire all, key %d -> fence %d", in.Key+1, out.Fence)
		case "write":
			return fmt.Sprintf("write(fences %d, %d; %d, %d) -> %s", in.Fence, in.Fence2, in.Value, in.Value2, res)
		}
		return fmt.Sprintf("read(fences %d, %d) -> %s", in.Fence, in.Fence2, res)
	},
	DescribeState: func(state interface{}) string {
		s, ok := state.(pairState)
		if !ok {
			return fmt.Sprint(state)
		}
		return fmt.Sprintf("granted %d, %d; registers: fence %d value %d, fence %d value %d",
			s.GrantedA, s.GrantedB, s.FenceA, s.ValueA, s.FenceB, s.ValueB)
	},
}
