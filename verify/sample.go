// Resource samples of the worker processes: RSS and open file descriptors
// from /proc, goroutines as the worker reports them, and the growth check
// of long runs.

package verify

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Sample is one measurement of one worker process.
type Sample struct {
	W          int       // worker slot (a killed worker's replacement keeps it)
	PID        int       // the process
	At         time.Time // when the harness took it
	RSS        int64     // resident set size in bytes (VmRSS of /proc/PID/status); -1 if unreadable
	FDs        int       // open file descriptors (entries of /proc/PID/fd); -1 if unreadable
	Goroutines int       // runtime.NumGoroutine, as the worker reported it
}

// statsOp is the record a worker sends every Config.Sample: Value is its
// goroutine count. The harness then reads the process's RSS and open file
// descriptors from /proc, so that the three numbers are taken together.
const statsOp = "stats"

// reportStats sends the worker's goroutine count now and every d until ctx
// ends.
func reportStats(ctx context.Context, out *emitter, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		out.emit(record{Op: statsOp, Call: now(), Ret: now(), Value: int64(runtime.NumGoroutine()), OK: true})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampled records a worker's stats record as a Sample (r.mu is held).
func (r *runner) sampled(rec record) {
	r.samples = append(r.samples, Sample{W: rec.W, PID: rec.PID, At: time.Now(),
		RSS: procRSS(rec.PID), FDs: procFDs(rec.PID), Goroutines: int(rec.Value)})
}

// procRSS is VmRSS of /proc/pid/status in bytes, or -1.
func procRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// procFDs counts the entries of /proc/pid/fd, or -1.
func procFDs(pid int) int {
	es, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return -1
	}
	return len(es)
}

// GrowthRule says when a process's resource use grew beyond noise. A
// process is judged on its samples taken after Warmup (counted from its own
// first sample), if at least MinSamples remain: the median of the last third
// of them must not exceed the median of the first third by more than
// Abs + Rel × that first median, for each of RSS, goroutines and file
// descriptors. Medians of thirds ignore a spike (a burst of connections
// during a fault) and a warm heap; a leak of one goroutine, descriptor or
// connection per acquisition, fault or restart grows without bound and
// crosses any fixed margin in a long run.
type GrowthRule struct {
	Warmup                time.Duration
	MinSamples            int
	RSSAbs                int64 // bytes
	RSSRel                float64
	GoroutinesAbs, FDsAbs float64
	GoroutinesRel, FDsRel float64
}

// DefaultGrowth is the rule of long runs (Config.Sample > 0): two minutes of
// warm-up, at least nine samples after it (90 s at the 10 s interval), and
// margins of 8 MiB + 25 % (RSS), 5 + 20 % (goroutines) and 4 + 20 % (file
// descriptors).
var DefaultGrowth = GrowthRule{
	Warmup: 2 * time.Minute, MinSamples: 9,
	RSSAbs: 8 << 20, RSSRel: 0.25,
	GoroutinesAbs: 5, GoroutinesRel: 0.20,
	FDsAbs: 4, FDsRel: 0.20,
}

// Trend is one resource of one process: the median of the first and of the
// last third of its judged samples, the largest sample, and the limit the
// last median must stay within.
type Trend struct {
	First, Last, Max, Limit float64
	Grew                    bool
}

// ProcessTrend is one worker process's judged series.
type ProcessTrend struct {
	W, PID     int
	Samples    int           // judged samples (after warm-up)
	Span       time.Duration // first to last judged sample
	RSS        Trend         // bytes
	Goroutines Trend
	FDs        Trend
}

// Grew reports whether any of the process's resources grew beyond noise.
func (p ProcessTrend) Grew() bool { return p.RSS.Grew || p.Goroutines.Grew || p.FDs.Grew }

// String renders the trend for people: first → last (max).
func (p ProcessTrend) String() string {
	mib := func(v float64) string { return fmt.Sprintf("%.1f", v/(1<<20)) }
	s := fmt.Sprintf("worker %d pid %d, %d samples over %v: RSS %s → %s MiB (max %s), goroutines %.0f → %.0f (max %.0f), fds %.0f → %.0f (max %.0f)",
		p.W, p.PID, p.Samples, p.Span.Round(time.Second), mib(p.RSS.First), mib(p.RSS.Last), mib(p.RSS.Max),
		p.Goroutines.First, p.Goroutines.Last, p.Goroutines.Max, p.FDs.First, p.FDs.Last, p.FDs.Max)
	var grew []string
	if p.RSS.Grew {
		grew = append(grew, fmt.Sprintf("RSS beyond %s MiB", mib(p.RSS.Limit)))
	}
	if p.Goroutines.Grew {
		grew = append(grew, fmt.Sprintf("goroutines beyond %.0f", p.Goroutines.Limit))
	}
	if p.FDs.Grew {
		grew = append(grew, fmt.Sprintf("fds beyond %.0f", p.FDs.Limit))
	}
	if len(grew) > 0 {
		s += ": GREW (" + strings.Join(grew, ", ") + ")"
	}
	return s
}

// CheckGrowth judges every process of samples with at least rule.MinSamples
// samples after its warm-up, in order of worker and PID. Processes that
// lived too short a time (replaced after a kill) are left out.
func CheckGrowth(samples []Sample, rule GrowthRule) []ProcessTrend {
	byPID := map[int][]Sample{}
	for _, s := range samples {
		byPID[s.PID] = append(byPID[s.PID], s)
	}
	var out []ProcessTrend
	for pid, ss := range byPID {
		sort.Slice(ss, func(i, j int) bool { return ss[i].At.Before(ss[j].At) })
		from := ss[0].At.Add(rule.Warmup)
		i := sort.Search(len(ss), func(i int) bool { return !ss[i].At.Before(from) })
		ss = ss[i:]
		if len(ss) < max(rule.MinSamples, 3) {
			continue
		}
		p := ProcessTrend{W: ss[0].W, PID: pid, Samples: len(ss), Span: ss[len(ss)-1].At.Sub(ss[0].At)}
		p.RSS = trend(ss, func(s Sample) float64 { return float64(s.RSS) }, float64(rule.RSSAbs), rule.RSSRel)
		p.Goroutines = trend(ss, func(s Sample) float64 { return float64(s.Goroutines) }, rule.GoroutinesAbs, rule.GoroutinesRel)
		p.FDs = trend(ss, func(s Sample) float64 { return float64(s.FDs) }, rule.FDsAbs, rule.FDsRel)
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].W != out[j].W {
			return out[i].W < out[j].W
		}
		return out[i].PID < out[j].PID
	})
	return out
}

// trend compares the median of the last third of ss with the first third's.
func trend(ss []Sample, v func(Sample) float64, abs, rel float64) Trend {
	n := len(ss) / 3
	var t Trend
	for _, s := range ss {
		t.Max = max(t.Max, v(s))
	}
	t.First = median(ss[:n], v)
	t.Last = median(ss[len(ss)-n:], v)
	t.Limit = t.First + abs + rel*t.First
	t.Grew = t.Last > t.Limit
	return t
}

func median(ss []Sample, v func(Sample) float64) float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = v(s)
	}
	sort.Float64s(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// resources adds the samples, the judged trends and any growth to rep.
func (r *runner) resources(rep *Report) {
	if r.cfg.Sample <= 0 {
		return
	}
	r.mu.Lock()
	rep.Samples = append([]Sample(nil), r.samples...)
	r.mu.Unlock()
	rep.Trends = CheckGrowth(rep.Samples, DefaultGrowth)
	for _, p := range rep.Trends {
		if p.Grew() {
			rep.Violations = append(rep.Violations, "resource growth: "+p.String())
		}
	}
}

// resourcesString renders the sampling part of the report.
func (r *Report) resourcesString() string {
	if len(r.Samples) == 0 {
		return ""
	}
	pids := map[int]bool{}
	for _, s := range r.Samples {
		pids[s.PID] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "samples            %d of %d worker processes, %d judged for growth\n", len(r.Samples), len(pids), len(r.Trends))
	for _, p := range r.Trends {
		fmt.Fprintf(&b, "  %s\n", p)
	}
	return b.String()
}
