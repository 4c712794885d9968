// Optional: with -private-redis every Redis system runs against a private
// redis-server, and the cycle and contention scenarios record the server's
// own CPU time, command count and time in commands per acquisition (INFO
// cpu / stats / commandstats), which other clients of a shared server would
// blur.

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
	cpu      time.Duration    // used_cpu_user + used_cpu_sys
	commands int64            // total_commands_processed (script-internal commands included)
	usec     map[string]int64 // INFO commandstats: microseconds spent in each command
	ok       bool
}

func readRedis(ctx context.Context, addr string) redisSnap {
	if addr == "" {
		return redisSnap{}
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	s, err := rdb.Info(ctx, "cpu", "stats", "commandstats").Result()
	if err != nil {
		return redisSnap{}
	}
	return parseRedisInfo(s)
}

// parseRedisInfo reads the counters redisSnap holds from an INFO reply.
func parseRedisInfo(s string) redisSnap {
	snap := redisSnap{usec: map[string]int64{}}
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
		// cmdstat_evalsha:calls=2,usec=10,usec_per_call=5.00,...
		if name, ok := strings.CutPrefix(k, "cmdstat_"); ok {
			for _, f := range strings.Split(val, ",") {
				if v, ok := strings.CutPrefix(f, "usec="); ok {
					snap.usec[name], _ = strconv.ParseInt(v, 10, 64)
				}
			}
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
	usec     int64 // time in the commands the system's clients sent
}

// add accumulates the difference between two readings around a period in
// which one system ran; sent names the commands its clients send
// themselves. Their commandstats times are summed: a script's (EVALSHA) or
// a transaction's (EXEC) time includes the commands it runs, whose own
// entries are then left out, so nothing is counted twice. It is the time
// the server spent executing the system's requests, without the network
// and event-loop work that used_cpu adds.
func (c *redisCost) add(a, b redisSnap, sent []string) {
	if a.ok && b.ok {
		c.cpu += b.cpu - a.cpu
		c.commands += b.commands - a.commands - 1 // the INFO itself
		for _, name := range sent {
			c.usec += b.usec[name] - a.usec[name]
		}
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
	if c.usec > 0 {
		r.Counters["redis_command_us_per_op"] = float64(c.usec) / float64(ops)
	}
}
