// The harness against a private three-server ZooKeeper ensemble whose
// servers, the leader on every other restart, are killed and started again
// while leases are held. Run it alone with
//
//	./scripts/test -run TestZooKeeperEnsembleRestarts ./verify/

package verify_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/zktest"
	"github.com/leasekit/lease/verify"
)

// zkRestarter restarts one server of an ensemble per call.
type zkRestarter struct {
	t    *testing.T
	e    *zktest.Ensemble
	mu   sync.Mutex
	next int
	// killed counts the restarts by role ("leader", "follower").
	killed map[string]int
}

// restart kills one server with SIGKILL — the leader (found with srvr) on
// every odd call, else the servers in turn — and starts it again once the
// others have noticed, then waits until the ensemble serves again.
func (r *zkRestarter) restart(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	s := r.e.Servers[(r.next/2)%3]
	if r.next%2 == 1 {
		l, err := r.e.Leader(ctx)
		if err != nil {
			return err
		}
		s = l
	}
	role, err := s.Mode(ctx)
	if err != nil {
		role = "unknown: " + err.Error()
	}
	r.killed[role]++
	r.t.Logf("verify: kill -9 ZooKeeper server %d (%s, %s) and restart it", s.ID, s.Addr, role)
	if err := s.Kill(); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	if err := s.Start(); err != nil {
		return err
	}
	return r.e.WaitServing(ctx)
}

func TestZooKeeperEnsembleRestarts(t *testing.T) {
	t.Parallel()
	e := zktest.Start(t)
	r := &zkRestarter{t: t, e: e, killed: map[string]int{}}
	// TTL 2s as on the etcd cluster: three JVMs on a small CI machine, and
	// a leader election stalls writes for a second or two. The session
	// outlives a server's restart (the client moves to another server).
	rep := run(t, verify.Config{Store: "zk://" + strings.Join(e.Addrs(), ",") + "?session_timeout=8s", TTL: 2 * time.Second,
		Duration: max(runDuration(t), 45*time.Second), Restart: r.restart,
		Faults: []string{verify.FaultRestart, verify.FaultKill, verify.FaultRestart, verify.FaultStop}})
	check(t, rep, verify.FaultRestart, verify.FaultKill)
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("ZooKeeper servers restarted by role: %v", r.killed)
	if r.killed["leader"] == 0 {
		t.Errorf("no restart hit the leader: %v", r.killed)
	}
}
