// Scenario 2 (and 5 on PostgreSQL): N workers on one key, each holding it for
// a while, releasing and queueing again at once. Measures throughput, the
// hand-off from a release to the next acquisition by another worker, how
// often the releaser re-takes the key, every acquire call's wait and the
// spread of acquisitions per worker.

package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"
)

type contention struct {
	mu          sync.Mutex
	lastWorker  int // -1 before the first release
	lastRelease time.Time
	per         []int
	total       int
	withPrev    int // acquisitions that followed a release
	retakes     int
	handoff     []time.Duration
	held        time.Duration // the holds' sum, from each acquisition to its release call
	waits       []time.Duration
	censored    int // waits still running when the scenario ended
	errors      int
}

// contRun is one system's contention measurement, set up once and run in
// phases interleaved with the other systems' (see runContentions).
type contRun struct {
	sys     System
	r       Result
	hold    time.Duration
	lockers []Locker
	st      *contention
	el      time.Duration
	cost    redisCost
	reqs    int64 // client requests on the wire while measuring
}

// setupContention makes the workers' lockers; on failure the result says
// why the system was skipped.
func setupContention(ctx context.Context, env *Env, sys System, scenario string, workers int, hold time.Duration) *contRun {
	c := &contRun{sys: sys, hold: hold, r: Result{Scenario: scenario, System: sys.Name, Store: sys.Store, Clients: workers, Note: sys.Note}}
	ttl := max(5*time.Second, sys.MinTTL)
	c.r.TTLMs, c.r.HoldMs = ms(ttl), ms(hold)
	key := fmt.Sprintf("%s-%d-%s-%s", scenario, workers, sys.Name, sys.Store)

	c.lockers = make([]Locker, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	for i := range c.lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.lockers[i], errs[i] = sys.New(sctx, env, key, ttl)
		}()
	}
	wg.Wait()
	scancel()
	for _, err := range errs {
		if err != nil {
			c.r.Skipped = "setup: " + err.Error()
			closeAll(c.lockers)
			c.lockers = nil
			return c
		}
	}
	c.st = &contention{lastWorker: -1, per: make([]int, workers)}
	return c
}

// phase lets the workers contend for dur. Waits still running when it ends
// are kept as censored waits; the first acquisition of a phase counts no
// hand-off.
func (c *contRun) phase(ctx context.Context, env *Env, dur time.Duration) {
	if c.lockers == nil {
		return
	}
	c.st.mu.Lock()
	c.st.lastWorker = -1
	c.st.mu.Unlock()
	rctx, cancel := context.WithCancel(ctx)
	var before redisSnap
	if c.sys.Store == "redis" {
		before = readRedis(ctx, env.StatsRedis)
	}
	reqs := counterFor(c.sys.Key())
	req0 := reqs.n.Load()
	start := time.Now()
	var wg sync.WaitGroup
	for w, l := range c.lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.st.worker(rctx, w, l, c.hold)
		}()
	}
	select {
	case <-time.After(dur):
	case <-ctx.Done():
	}
	cancel()
	c.el += time.Since(start)
	wg.Wait()
	c.reqs += reqs.n.Load() - req0
	if c.sys.Store == "redis" {
		c.cost.add(before, readRedis(ctx, env.StatsRedis), reqs.commandNames())
	}
}

// contentionWarmUp is how long each system contends, unmeasured, before
// its first measured phase.
const contentionWarmUp = 300 * time.Millisecond

// warmUp runs one unmeasured phase and forgets what it measured.
func (c *contRun) warmUp(ctx context.Context, env *Env) {
	if c.lockers == nil {
		return
	}
	c.phase(ctx, env, contentionWarmUp)
	c.st = &contention{lastWorker: -1, per: make([]int, len(c.lockers))}
	c.el, c.reqs, c.cost = 0, 0, redisCost{}
}

// result closes the lockers and returns the measurement.
func (c *contRun) result() Result {
	if c.lockers == nil {
		return c.r
	}
	closeAll(c.lockers)
	r, st, el := c.r, c.st, c.el
	r.DurationS = el.Seconds()
	r.Samples = st.total
	r.Errors = st.errors
	r.OpsPerS = float64(st.total) / el.Seconds()
	r.PerWorker = st.per
	mn, mx := st.per[0], st.per[0]
	for _, n := range st.per {
		mn, mx = min(mn, n), max(mx, n)
	}
	r.PerWorkerMin, r.PerWorkerMax = iptr(mn), iptr(mx)
	if st.withPrev > 0 {
		r.RetakePct = f64(100 * float64(st.retakes) / float64(st.withPrev))
	}
	var handoffMax *float64
	if len(st.handoff) > 0 {
		p50, p99, mx := summary(st.handoff)
		r.HandoffOtherP50Ms, r.HandoffOtherP99Ms = p50, p99
		handoffMax = mx
	}
	r.WaitP50Ms, r.WaitP99Ms, r.WaitMaxMs = summary(st.waits)
	r.P50Ms, r.P99Ms, r.MaxMs = r.WaitP50Ms, r.WaitP99Ms, r.WaitMaxMs
	r.Counters = map[string]any{"censored_waits": st.censored, "retakes": st.retakes, "handoffs_other": len(st.handoff)}
	if st.total > 0 {
		r.Counters["hold_mean_ms"] = ms(st.held / time.Duration(st.total))
	}
	if handoffMax != nil {
		r.Counters["handoff_other_max_ms"] = *handoffMax
	}
	c.cost.record(&r, st.total)
	if c.reqs > 0 && st.total > 0 && c.sys.Store != "file" && c.sys.Store != "memory" {
		r.Counters["client_requests_per_op"] = float64(c.reqs) / float64(st.total)
	}
	return r
}

// runContentions measures every system for dur in total, in rounds: each
// round gives every system an equal slice, one after the other, so that a
// change in the machine's load (2 shared cores) affects them all alike and
// the ratios hold. All systems are set up first and stay connected.
func runContentions(ctx context.Context, env *Env, syss []System, scenario string, workers int, hold, dur time.Duration, rounds int) []Result {
	cs := make([]*contRun, len(syss))
	for i, sys := range syss {
		cs[i] = setupContention(ctx, env, sys, scenario, workers, hold)
	}
	// A warm-up phase per system, not measured: the first waits open what
	// a system opens lazily (leasekit's release subscription, a pool's
	// further connections), once per worker.
	for _, c := range cs {
		c.warmUp(ctx, env)
	}
	slice := dur / time.Duration(rounds)
	for round := 0; round < rounds && ctx.Err() == nil; round++ {
		for _, c := range rotated(cs, round) {
			c.phase(ctx, env, slice)
		}
	}
	rs := make([]Result, len(cs))
	for i, c := range cs {
		rs[i] = c.result()
	}
	return rs
}

// runContention measures one system for dur in one phase.
func runContention(ctx context.Context, env *Env, sys System, scenario string, workers int, hold, dur time.Duration) Result {
	return runContentions(ctx, env, []System{sys}, scenario, workers, hold, dur, 1)[0]
}

func (st *contention) worker(ctx context.Context, w int, l Locker, hold time.Duration) {
	for ctx.Err() == nil {
		t0 := time.Now()
		unlock, err := l.Lock(ctx)
		t1 := time.Now()
		if err != nil {
			st.mu.Lock()
			if ctx.Err() != nil {
				// Still waiting when the scenario ended: a lower bound of
				// this wait, kept so that starved workers show.
				st.waits = append(st.waits, t1.Sub(t0))
				st.censored++
			} else {
				st.errors++
			}
			st.mu.Unlock()
			if ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		st.mu.Lock()
		st.total++
		st.per[w]++
		st.waits = append(st.waits, t1.Sub(t0))
		if st.lastWorker >= 0 {
			st.withPrev++
			if st.lastWorker == w {
				st.retakes++
			} else {
				st.handoff = append(st.handoff, t1.Sub(st.lastRelease))
			}
		}
		st.mu.Unlock()
		if hold > 0 {
			holdFor(hold)
		}
		st.mu.Lock()
		st.lastWorker = w
		st.lastRelease = time.Now()
		st.held += st.lastRelease.Sub(t1)
		st.mu.Unlock()
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := unlock(uctx); err != nil {
			st.mu.Lock()
			st.errors++
			st.mu.Unlock()
		}
		cancel()
	}
}

// closeAll closes lockers in parallel, bounded in time; nil ones are
// skipped.
func closeAll[T io.Closer](ls []T) {
	var wg sync.WaitGroup
	for _, l := range ls {
		if any(l) == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = l.Close()
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
	}
}

// holdWithSleep makes the workers hold with time.Sleep (Plan.SleepHold, flag
// -sleep-hold), as the first measurement did, instead of holdFor's
// nanosleep.
var holdWithSleep bool

// holdFor is a worker's hold: it blocks the goroutine's thread for d with
// nanosleep(2), precise to the kernel's timer slack (50 µs by default). A
// time.Sleep is not precise here: when the runtime has nothing else to run it
// waits for the timer in the network poller, whose timeout is whole
// milliseconds from the poller's last wake, so a 1 ms sleep lasts 1 to 2 ms
// depending on when the system under test last had network traffic: its own
// requests during the hold lengthen it (measured on 2026-12-01, 16 workers on
// ZooKeeper: 1.42 ms for zk-lock, 1.81 ms for a leasekit build whose next
// waiter lists the nodes during the hold). Only the holder sleeps so, one
// worker at a time.
func holdFor(d time.Duration) {
	if holdWithSleep {
		time.Sleep(d)
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var left syscall.Timespec
		err := syscall.Nanosleep(&ts, &left)
		if err != syscall.EINTR {
			return
		}
		ts = left
	}
}
