// Scenario 1: uncontended acquire+release cycles by one client on one key.
// The systems run interleaved, in short rounds, so that a change in the
// machine's load (2 shared cores) affects them all alike and the ratios hold.

package main

import (
	"context"
	"fmt"
	"time"
)

type cycler struct {
	sys  System
	l    Locker
	r    Result
	lat  []time.Duration
	el   time.Duration
	cost redisCost
	reqs int64 // client requests on the wire while measuring
	dead bool
}

func (c *cycler) cycle(ctx context.Context) error {
	unlock, err := c.l.Lock(ctx)
	if err != nil {
		return err
	}
	return unlock(ctx)
}

// runCycles measures every system for dur in total, in rounds.
func runCycles(ctx context.Context, env *Env, syss []System, dur time.Duration, rounds int) []Result {
	cs := make([]*cycler, len(syss))
	for i, sys := range syss {
		c := &cycler{sys: sys, r: Result{Scenario: "cycle", System: sys.Name, Store: sys.Store, Clients: 1, Note: sys.Note}}
		cs[i] = c
		ttl := max(10*time.Second, sys.MinTTL)
		c.r.TTLMs = ms(ttl)
		l, err := sys.New(ctx, env, fmt.Sprintf("cycle-%s-%s", sys.Name, sys.Store), ttl)
		if err != nil {
			c.r.Skipped, c.dead = "setup: "+err.Error(), true
			continue
		}
		c.l = l
		// Warm up: connections, scripts, subscriptions.
		for j := 0; j < 20; j++ {
			if err := c.cycle(ctx); err != nil {
				c.r.Skipped, c.dead = "warm-up: "+err.Error(), true
				break
			}
		}
	}
	slice := dur / time.Duration(rounds)
	for round := 0; round < rounds && ctx.Err() == nil; round++ {
		for _, c := range rotated(cs, round) {
			if c.dead {
				continue
			}
			var before redisSnap
			if c.sys.Store == "redis" {
				before = readRedis(ctx, env.StatsRedis)
			}
			req0 := counterFor(c.sys.Key()).n.Load()
			start := time.Now()
			end := start.Add(slice)
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				if err := c.cycle(ctx); err != nil {
					c.r.Errors++
					continue
				}
				c.lat = append(c.lat, time.Since(t0))
			}
			c.el += time.Since(start)
			c.reqs += counterFor(c.sys.Key()).n.Load() - req0
			if c.sys.Store == "redis" {
				c.cost.add(before, readRedis(ctx, env.StatsRedis), counterFor(c.sys.Key()).commandNames())
			}
		}
	}
	out := make([]Result, len(cs))
	var ls []Locker
	for i, c := range cs {
		if c.l != nil {
			ls = append(ls, c.l)
		}
		if !c.dead {
			c.r.DurationS = c.el.Seconds()
			c.r.Samples = len(c.lat)
			c.r.OpsPerS = float64(len(c.lat)) / c.el.Seconds()
			c.r.P50Ms, c.r.P99Ms, c.r.MaxMs = summary(c.lat)
			c.r.Counters = map[string]any{}
			if len(c.lat) > 0 {
				// The fast cycles (summary sorted c.lat): on 2 shared cores a
				// cycle takes either tens of µs, when client and server stay
				// on their cores, or about a hundred more, when an idle core
				// must be woken; the low percentiles show a system's own cost.
				c.r.Counters["p10_ms"] = pct(c.lat, 10)
			}
			c.cost.record(&c.r, len(c.lat))
			if c.reqs > 0 && len(c.lat) > 0 {
				c.r.Counters["client_requests_per_op"] = float64(c.reqs) / float64(len(c.lat))
			}
		}
		out[i] = c.r
	}
	closeAll(ls)
	return out
}

// rotated returns xs starting at element round mod len(xs): each round
// starts with the next system, so that no system always runs right after the
// same one (or first, after the set-up).
func rotated[T any](xs []T, round int) []T {
	if len(xs) == 0 {
		return xs
	}
	k := round % len(xs)
	return append(append(make([]T, 0, len(xs)), xs[k:]...), xs[:k]...)
}
