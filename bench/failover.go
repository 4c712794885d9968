// Scenario 3: crash fail-over. A worker process (this binary, re-executed
// with -failover-child) acquires the key and reports it; a waiter in this
// process starts waiting; the worker is SIGKILLed. Fail-over is the time from
// the crashed holder's acquisition (its last write: it is killed long before
// its first renewal) to the waiter's acquisition, on the host's wall clock,
// which both processes share.

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

const failoverTTL = 2 * time.Second

func runFailover(ctx context.Context, env *Env, sys System, trials int) Result {
	r := Result{Scenario: "failover", System: sys.Name, Store: sys.Store, Clients: 2, Note: sys.Note}
	ttl := max(failoverTTL, sys.MinTTL)
	r.TTLMs = ms(ttl)
	var fo, kill, fromCall []time.Duration
	var lastErr error
	for i := 0; i < trials && ctx.Err() == nil; i++ {
		t, err := failoverTrial(ctx, env, sys, fmt.Sprintf("failover-%s-%s-%d", sys.Name, sys.Store, i), ttl)
		if err != nil {
			r.Errors++
			lastErr = err
			continue
		}
		fo = append(fo, t.fromHeld)
		kill = append(kill, t.fromKill)
		fromCall = append(fromCall, t.fromCall)
	}
	if len(fo) == 0 {
		r.Skipped = fmt.Sprintf("no successful trial: %v", lastErr)
		return r
	}
	for _, d := range fo {
		r.TrialsMs = append(r.TrialsMs, ms(d))
	}
	r.Samples = len(fo)
	r.P50Ms, r.P99Ms, r.MaxMs = summary(fo)
	kp50, _, _ := summary(kill)
	r.Counters = map[string]any{"kill_to_next_holder_p50_ms": *kp50, "from_lock_call_min_ms": ms(slices.Min(fromCall))}
	if lastErr != nil {
		r.Counters["last_error"] = lastErr.Error()
	}
	return r
}

// trial is one fail-over trial's figures: the time to the waiter's
// acquisition from the holder's (when its Lock returned: the report's
// fail-over), from the holder's Lock call (the lease cannot have been
// written before it, so a correct lock never gives less than the TTL here,
// while from the return it may, by the time the holder took to return after
// its write), and from the SIGKILL.
type trial struct{ fromHeld, fromCall, fromKill time.Duration }

// failoverTrial runs one trial.
func failoverTrial(ctx context.Context, env *Env, sys System, key string, ttl time.Duration) (trial, error) {
	tctx, cancel := context.WithTimeout(ctx, ttl+30*time.Second)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		return trial{}, err
	}
	args := append([]string{"-failover-child", "-system=" + sys.Key(), "-key=" + key, "-ttl=" + ttl.String()}, env.childArgs()...)
	cmd := exec.CommandContext(tctx, exe, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return trial{}, err
	}
	if err := cmd.Start(); err != nil {
		return trial{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "HELD ") {
				line <- sc.Text()
				return
			}
		}
		close(line)
	}()
	var called, held time.Time
	select {
	case l, ok := <-line:
		if !ok {
			return trial{}, fmt.Errorf("worker exited without holding the key")
		}
		var cns, hns int64
		if _, err := fmt.Sscanf(l, "HELD %d %d", &cns, &hns); err != nil {
			return trial{}, fmt.Errorf("worker said %q: %w", l, err)
		}
		called, held = time.Unix(0, cns), time.Unix(0, hns)
	case <-time.After(25 * time.Second):
		return trial{}, fmt.Errorf("worker did not hold the key within 25s")
	}

	w, err := sys.New(tctx, env, key, ttl)
	if err != nil {
		return trial{}, fmt.Errorf("waiter: %w", err)
	}
	defer func() { _ = w.Close() }()
	type res struct {
		at     time.Time
		unlock func(context.Context) error
		err    error
	}
	got := make(chan res, 1)
	go func() {
		unlock, err := w.Lock(tctx)
		got <- res{time.Now(), unlock, err}
	}()
	// Let the waiter find the key held and start waiting, then crash the
	// holder: still well before its first renewal (TTL/3).
	time.Sleep(150 * time.Millisecond)
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return trial{}, err
	}
	g := <-got
	if g.err != nil {
		return trial{}, fmt.Errorf("waiter: %w", g.err)
	}
	uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = g.unlock(uctx)
	ucancel()
	if g.at.Sub(killed) < 0 {
		return trial{}, fmt.Errorf("waiter acquired before the holder was killed")
	}
	return trial{fromHeld: g.at.Sub(held), fromCall: g.at.Sub(called), fromKill: g.at.Sub(killed)}, nil
}

// failoverChild is the worker process: acquire, report, hold until killed
// (at most a minute).
func failoverChild(env *Env, sysKey, key string, ttl time.Duration) int {
	sys, ok := findSystem(sysKey)
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown system %q\n", sysKey)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := sys.New(ctx, env, key, ttl)
	if err != nil {
		fmt.Fprintf(os.Stderr, "failover worker %s: %v\n", sysKey, err)
		return 1
	}
	called := time.Now()
	if _, err := l.Lock(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "failover worker %s: lock: %v\n", sysKey, err)
		return 1
	}
	fmt.Printf("HELD %d %d\n", called.UnixNano(), time.Now().UnixNano())
	<-ctx.Done()
	return 0
}

func findSystem(key string) (System, bool) {
	for _, s := range allSystems() {
		if s.Key() == key {
			return s, true
		}
	}
	return System{}, false
}
