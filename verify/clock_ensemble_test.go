// Store clock faults on a ZooKeeper ensemble: the leader's clock alone.

package verify_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/faketime"
	"github.com/leasekit/lease/internal/zktest"
	"github.com/leasekit/lease/verify"
)

// TestClockZooKeeperEnsemble: the clock faults on a private three-server
// ensemble, each server under a libfaketime clock of its own. The leader
// stamps every write's mtime (a follower forwards writes to it), so the
// nemesis steps the clock of the server that leads when a step is made
// (the drift's small steps go to the same one); the others keep real time,
// as when one host's clock is stepped. TTL, hold and duration as on the
// standalone server (TestClockZooKeeper); session 8 s, as the other
// ensemble runs. At the longer size only (LEASE_VERIFY_DURATION): beside
// the rest of CI, three JVMs under libfaketime on two cores fitted one
// forward step into 40 s and needed a second run, 125 s in all.
func TestClockZooKeeperEnsemble(t *testing.T) {
	if os.Getenv("LEASE_VERIFY_DURATION") == "" {
		t.Skip("the ensemble's clock faults run at the longer size only: set LEASE_VERIFY_DURATION (e.g. 1m)")
	}
	t.Parallel()
	var clocks [3]*faketime.Clock
	for i := range clocks {
		clocks[i] = faketime.New(t)
	}
	e := zktest.StartWith(t, zktest.Options{Env: func(id int) []string { return clocks[id-1].Env(faketime.Cached()) }})
	addrs := strings.Join(e.Addrs(), ",")
	probe := dialZK(t, addrs, 4*time.Second)
	var (
		mu     sync.Mutex
		leader *faketime.Clock
		ids    = map[int]int{} // steps by server id
	)
	step := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		if leader == nil || d.Abs() >= 100*time.Millisecond {
			l, err := e.Leader(ctx)
			if err != nil {
				return err
			}
			leader = clocks[l.ID-1]
			ids[l.ID]++
		}
		return stepSettled(leader, probe.now)(ctx, d)
	}
	offset := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return leader.Offset()
	}
	checkStep(t, step, probe.now, nil)
	// Safety alone is required: on the ensemble a run's one or two
	// forward steps let no second holder in now and then (2 runs of 6).
	rep := runClock(t, "zk://"+addrs+"?session_timeout=8s", time.Second, 40*time.Second, 15, offset, step, false)
	t.Logf("%d early grants of %d forward steps", rep.EarlyGrants, rep.Faults[verify.FaultClockForward])
	mu.Lock()
	defer mu.Unlock()
	t.Logf("leader clock steps by server id: %v", ids)
}
