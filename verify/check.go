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
	Op    string // acquire, read, write
	Fence uint64
	Value int64 // write: the value written
}

type opOutput struct {
	OK      bool // acquire: granted; read/write: accepted by the register
	Unknown bool // the outcome was not seen (error, killed)
	Fence   uint64
	Value   int64 // read: the value returned
}

// modelState: the largest fence granted, the register's fence and value.
type modelState struct {
	Granted uint64
	Fence   uint64
	Value   int64
}

// model is a fenced lock and register: every acquisition's fence is larger
// than all earlier ones; a read or write is accepted iff its fence is at
// least the register's (and then raises it); a read returns the value.
var model = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{modelState{}} },
	Step: func(state, input, output interface{}) []interface{} {
		s, in, out := state.(modelState), input.(opInput), output.(opOutput)
		switch in.Op {
		case "acquire":
			if out.Fence <= s.Granted {
				return nil
			}
			s.Granted = out.Fence
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
			in, out = opInput{Op: "acquire"}, opOutput{OK: true, Fence: r.Fence}
		case "read":
			in, out = opInput{Op: "read", Fence: r.Fence}, opOutput{OK: r.OK, Value: r.Value}
		case "write":
			in, out = opInput{Op: "write", Fence: r.Fence, Value: r.Value}, opOutput{OK: r.OK}
		default:
			continue
		}
		ret := r.Ret
		if ret == 0 {
			out.Unknown, ret = true, last+1
		}
		ops = append(ops, porcupine.Operation{ClientId: r.W, Input: in, Call: r.Call, Output: out, Return: ret})
	}
	return ops
}

// analyse fills the counts of rep from the records.
func analyse(rep *Report, recs []record) {
	sort.Slice(recs, func(i, j int) bool { return recs[i].Call < recs[j].Call })
	type acq struct {
		fence uint64
		at    int64 // completion
	}
	var acqs []acq
	var accepted []acq // accepted register operations: fence, completion
	for _, r := range recs {
		switch r.Op {
		case "acquire":
			rep.Acquisitions++
			acqs = append(acqs, acq{r.Fence, r.Ret})
		case "read", "write":
			rep.Operations++
			if r.OK && r.Ret != 0 {
				accepted = append(accepted, acq{r.Fence, r.Ret})
			}
		}
	}
	overlapping := map[[2]uint64]bool{}
	for _, r := range recs {
		if r.Op != "read" && r.Op != "write" {
			continue
		}
		// Superseded: a newer holder had acquired before this op began.
		var newer uint64
		for _, a := range acqs {
			if a.fence > r.Fence && a.at < r.Call && (newer == 0 || a.fence < newer) {
				newer = a.fence
			}
		}
		// Stale: a newer fence had already been accepted by the register.
		stale := false
		for _, a := range accepted {
			if a.fence > r.Fence && a.at < r.Call {
				stale = true
				break
			}
		}
		if newer != 0 {
			rep.UnfencedLetThrough++
			overlapping[[2]uint64{r.Fence, newer}] = true
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

	// Fences must grow in real time: an acquisition that began after another
	// completed has a larger fence. (porcupine checks this too; this names
	// the culprits.)
	byRet := append([]acq(nil), acqs...)
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].at < byRet[j].at })
	for _, r := range recs {
		if r.Op != "acquire" {
			continue
		}
		i := sort.Search(len(byRet), func(i int) bool { return byRet[i].at >= r.Call })
		for _, a := range byRet[:i] {
			if a.fence >= r.Fence {
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
