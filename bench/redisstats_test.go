// Tests of the Redis server-cost accounting: INFO parsing, and the sum over
// the commands a system's clients sent (scripts' and transactions' inner
// commands not counted twice).

package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func info(cpuUser, cpuSys string, commands string, cmdstats ...string) string {
	s := "# CPU\r\nused_cpu_sys:" + cpuSys + "\r\nused_cpu_user:" + cpuUser + "\r\n\r\n# Stats\r\ntotal_commands_processed:" + commands + "\r\n\r\n# Commandstats\r\n"
	for _, c := range cmdstats {
		s += c + "\r\n"
	}
	return s
}

func TestRedisCost(t *testing.T) {
	a := parseRedisInfo(info("1.000000", "0.500000", "100",
		"cmdstat_evalsha:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0",
		"cmdstat_set:calls=10,usec=4,usec_per_call=0.40,rejected_calls=0,failed_calls=0"))
	b := parseRedisInfo(info("1.000300", "0.500100", "141",
		"cmdstat_evalsha:calls=30,usec=150,usec_per_call=5.00,rejected_calls=0,failed_calls=0",
		"cmdstat_set:calls=30,usec=12,usec_per_call=0.40,rejected_calls=0,failed_calls=0",
		"cmdstat_info:calls=2,usec=90,usec_per_call=45.00,rejected_calls=0,failed_calls=0"))
	if !a.ok || !b.ok {
		t.Fatal("not parsed")
	}
	if got, want := b.cpu-a.cpu, 400*time.Microsecond; got < want-time.Microsecond || got > want+time.Microsecond {
		t.Errorf("cpu = %v, want %v", got, want)
	}
	// A scripted system sent EVALSHA only: the SETs its scripts ran are in
	// EVALSHA's time and not added again; INFO is the benchmark's.
	var c redisCost
	c.add(a, b, []string{"evalsha"})
	if c.usec != 100 || c.commands != 40 {
		t.Errorf("scripted: usec %d, commands %d; want 100, 40", c.usec, c.commands)
	}
	var r Result
	c.record(&r, 20)
	if got := r.Counters["redis_command_us_per_op"]; got != 5.0 {
		t.Errorf("us per op = %v, want 5", got)
	}
	// A system that sends SET itself has both counted.
	var p redisCost
	p.add(a, b, []string{"set", "evalsha"})
	if p.usec != 108 {
		t.Errorf("plain+script: usec %d, want 108", p.usec)
	}
	// An unreadable reading adds nothing.
	var z redisCost
	z.add(redisSnap{}, b, []string{"evalsha"})
	if z.usec != 0 || z.cpu != 0 {
		t.Errorf("missing reading counted: %+v", z)
	}
}

// TestRedisHookNames checks that the hook records the commands a client
// sends itself, and a transaction as MULTI and EXEC only (its queued
// commands run inside EXEC, whose time includes theirs). No server is
// needed: the hook runs before the connection is made.
func TestRedisHookNames(t *testing.T) {
	w := &wire{}
	rdb := newCountedRedis("127.0.0.1:1", w) // nothing listens on port 1
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = rdb.EvalSha(ctx, "0000000000000000000000000000000000000000", []string{"k"}).Err()
	_, _ = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SetNX(ctx, "k", "v", time.Second)
		p.Incr(ctx, "f")
		return nil
	})
	got := w.commandNames()
	slices.Sort(got)
	if want := []string{"evalsha", "exec", "multi"}; !slices.Equal(got, want) {
		t.Errorf("names = %v, want %v", got, want)
	}
	if n := w.n.Load(); n != 2 {
		t.Errorf("round trips = %d, want 2", n)
	}
}
