// Go benchmarks of the uncontended cycle (scenario 1) per system, for
// profiling one system at a time: go test -run x -bench Cycle/leasekit@redis
// -cpuprofile cpu.out (with LEASE_TEST_* set, e.g. under scripts/test --exec).

package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// BenchmarkCycle runs acquire+release cycles of every available system on
// one key, as scenario 1 does, reporting allocations per cycle.
func BenchmarkCycle(b *testing.B) {
	env := envFromOS("gobench", b.TempDir())
	ctx := context.Background()
	for _, sys := range allSystems() {
		if ok, _ := env.available(sys.Store); !ok || strings.HasPrefix(sys.Store, "mem") {
			continue
		}
		b.Run(sys.Name+"@"+sys.Store, func(b *testing.B) {
			l, err := sys.New(ctx, env, "gobench-cycle-"+sys.Name+"-"+sys.Store, max(10*time.Second, sys.MinTTL))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = l.Close() }()
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				unlock, err := l.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
