// The harness against a private three-member etcd cluster whose members,
// the leader first, are killed and restarted while leases are held.
//
// It found a liveness bug in etcdlease, now fixed: a key whose release failed
// during the leader election stayed attached to the store's shared etcd
// lease, which the same process kept alive, so nobody ever got the key
// again. A lease is now shared only by the keys of one batch, and a key
// whose release failed is deleted by the store's next renewal round
// (etcdlease TestBatchSharesLease). Run it alone with
//
//	./scripts/test -run TestEtcdCluster ./verify/

package verify_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/verify"
)

type etcdMember struct {
	name, client string
	args         []string
	cmd          *exec.Cmd
	done         chan struct{}
}

type etcdCluster struct {
	t       *testing.T
	bin     string
	mu      sync.Mutex
	members []*etcdMember
	next    int // which member the next restart kills when it is not the leader's turn
}

func startEtcdCluster(t *testing.T) *etcdCluster {
	bin := os.Getenv("LEASE_TEST_ETCD_BIN")
	if bin == "" {
		bin = leasetest.Env(t, "LEASE_TEST_ETCD_BIN")
	}
	c := &etcdCluster{t: t, bin: bin}
	dir := t.TempDir()
	var initial []string
	ports := make([]int, 6)
	for i := range ports {
		ports[i] = freePort(t)
	}
	for i := 0; i < 3; i++ {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[3+i]))
	}
	token := fmt.Sprintf("verify-%d", time.Now().UnixNano()) // one per cluster
	for i := 0; i < 3; i++ {
		client := fmt.Sprintf("127.0.0.1:%d", ports[i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[3+i])
		m := &etcdMember{name: fmt.Sprintf("m%d", i), client: client, args: []string{
			"--name", fmt.Sprintf("m%d", i), "--data-dir", filepath.Join(dir, fmt.Sprintf("m%d", i)),
			"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--logger", "zap", "--log-outputs", filepath.Join(dir, fmt.Sprintf("m%d.log", i)), "--log-level", "warn",
		}}
		c.members = append(c.members, m)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			c.kill(m)
		}
	})
	for _, m := range c.members {
		if err := c.start(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.waitHealthy(context.Background(), 60*time.Second); err != nil {
		for i := range c.members {
			b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("m%d.log", i)))
			t.Logf("m%d %v:\n%s", i, c.members[i].args, b)
		}
		t.Fatal(err)
	}
	return c
}

func (c *etcdCluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.client)
	}
	return eps
}

func (c *etcdCluster) start(m *etcdMember) error {
	cmd := exec.Command(c.bin, m.args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	m.cmd, m.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(m.done)
	return nil
}

func (c *etcdCluster) kill(m *etcdMember) {
	if m.cmd != nil {
		_ = m.cmd.Process.Kill()
		<-m.done
		m.cmd = nil
	}
}

// waitHealthy waits until every member answers a linearizable read.
func (c *etcdCluster) waitHealthy(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for _, ep := range c.endpoints() {
		for {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: time.Second, Logger: zap.NewNop()})
			if err == nil {
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err = cli.Get(rctx, "health")
				cancel()
				_ = cli.Close()
			}
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("etcd member %s not healthy: %w", ep, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// leader returns the member that leads now.
func (c *etcdCluster) leader(ctx context.Context) (*etcdMember, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	for _, m := range c.members {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, m.client)
		cancel()
		if err == nil && st.Header.MemberId == st.Leader {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no leader found")
}

// restart kills one member — the leader on every other call — and starts it
// again once the cluster has noticed.
func (c *etcdCluster) restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	m := c.members[(c.next/2)%3]
	if c.next%2 == 1 {
		l, err := c.leader(ctx)
		if err != nil {
			return err
		}
		m = l
	}
	c.t.Logf("verify: kill -9 etcd member %s and restart it", m.name)
	c.kill(m)
	time.Sleep(2 * time.Second)
	if err := c.start(m); err != nil {
		return err
	}
	return c.waitHealthy(ctx, 60*time.Second)
}

func TestEtcdClusterMemberRestarts(t *testing.T) {
	t.Parallel()
	c := startEtcdCluster(t)
	rep := run(t, verify.Config{Store: "etcd://" + strings.Join(c.endpoints(), ","), TTL: 2 * time.Second,
		Duration: max(runDuration(t), 45*time.Second), Restart: c.restart,
		Faults: []string{verify.FaultRestart, verify.FaultKill, verify.FaultRestart, verify.FaultStop}})
	check(t, rep, verify.FaultRestart, verify.FaultKill)
}
