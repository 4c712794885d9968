// Optional: with -private-redis every Redis system runs against a private
// redis-server, and the cycle and contention scenarios record the server's
// own CPU time and command count per acquisition (INFO cpu / INFO stats),
// which other clients of a shared server would blur.

package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisSnap is a reading of the server's cumulative counters.
type redisSnap struct {
	cpu      time.Duration // used_cpu_user + used_cpu_sys
	commands int64         // total_commands_processed (script-internal commands included)
	ok       bool
}

func readRedis(ctx context.Context, addr string) redisSnap {
	if addr == "" {
		return redisSnap{}
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	s, err := rdb.Info(ctx, "cpu", "stats").Result()
	if err != nil {
		return redisSnap{}
	}
	var snap redisSnap
	var cpu float64
	for _, line := range strings.Split(s, "\r\n") {
		k, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_user", "used_cpu_sys":
			f, _ := strconv.ParseFloat(val, 64)
			cpu += f
		case "total_commands_processed":
			snap.commands, _ = strconv.ParseInt(val, 10, 64)
		}
	}
	snap.cpu = time.Duration(cpu * float64(time.Second))
	snap.ok = true
	return snap
}

// redisCost accumulates server cost over the periods a system ran.
type redisCost struct {
	cpu      time.Duration
	commands int64
}

func (c *redisCost) add(a, b redisSnap) {
	if a.ok && b.ok {
		c.cpu += b.cpu - a.cpu
		c.commands += b.commands - a.commands - 1 // the INFO itself
	}
}

// record stores the per-operation cost in r.Counters.
func (c *redisCost) record(r *Result, ops int) {
	if ops == 0 || c.commands == 0 {
		return
	}
	if r.Counters == nil {
		r.Counters = map[string]any{}
	}
	r.Counters["redis_server_cpu_us_per_op"] = float64(c.cpu) / float64(time.Microsecond) / float64(ops)
	r.Counters["redis_commands_per_op"] = float64(c.commands) / float64(ops)
}
