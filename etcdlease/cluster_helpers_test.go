// Private etcd clusters for tests: LEASE_TEST_ETCD_BIN processes on free
// loopback ports, data in t.TempDir(), killed at cleanup.

package etcdlease_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease/leasetest"

	"github.com/leasekit/lease/internal/testport"
)

// etcdBin returns the etcd binary for private clusters.
func etcdBin(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("LEASE_TEST_ETCD_BIN"); b != "" {
		return b
	}
	return leasetest.Env(t, "LEASE_TEST_ETCD_BIN") // skips, or fails in CI
}

// etcdNode is one etcd process of a private cluster.
type etcdNode struct {
	name    string
	client  string // host:port
	args    []string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// cluster is a private etcd cluster.
type cluster struct {
	t     testing.TB
	bin   string
	nodes []*etcdNode
}

// startCluster starts n etcd members with the extra flags given and waits
// until they have a leader.
func startCluster(t testing.TB, n int, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: etcdBin(t)}
	ports := testport.Free(t, 2*n)
	dir := t.TempDir()
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("n%d=http://127.0.0.1:%d", i, ports[n+i]))
	}
	token := "leasetest-" + randHex(4)
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		client := fmt.Sprintf("127.0.0.1:%d", ports[i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[n+i])
		args := []string{
			"--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn",
		}
		args = append(args, extra...)
		c.nodes = append(c.nodes, &etcdNode{name: name, client: client, args: args, logPath: filepath.Join(dir, name+".log")})
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			c.kill(nd)
		}
	})
	for _, nd := range c.nodes {
		c.start(nd)
	}
	c.waitReady(c.endpoints(), 60*time.Second)
	return c
}

// start starts nd's process (again, after a kill: it keeps its data).
func (c *cluster) start(nd *etcdNode) {
	c.t.Helper()
	logf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(c.bin, nd.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("starting etcd %s: %v", nd.name, err)
	}
	nd.cmd, nd.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(nd.exited)
}

// kill stops nd's process with SIGKILL and waits for it to exit.
func (c *cluster) kill(nd *etcdNode) {
	if nd.cmd == nil {
		return
	}
	_ = nd.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-nd.exited:
	case <-time.After(10 * time.Second):
		c.t.Errorf("etcd %s did not exit within 10s of SIGKILL", nd.name)
	}
	nd.cmd = nil
}

// endpoints returns the client endpoints of all members.
func (c *cluster) endpoints() []string { return clientEndpoints(c.nodes...) }

// waitReady waits until every endpoint of eps reports the same leader and a
// write through them succeeds; it fails the test after d, showing the logs.
func (c *cluster) waitReady(eps []string, d time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cli := newCli(c.t, eps)
	defer cli.Close()
	for {
		last := c.ready(ctx, cli, eps)
		if last == nil {
			return
		}
		select {
		case <-ctx.Done():
			c.dumpLogs()
			c.t.Fatalf("etcd cluster %v not ready within %v: %v", eps, d, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *cluster) ready(ctx context.Context, cli *clientv3.Client, eps []string) error {
	var leader uint64
	for _, ep := range eps {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		switch {
		case err != nil:
			return fmt.Errorf("status of %s: %w", ep, err)
		case st.Leader == 0:
			return fmt.Errorf("%s has no leader", ep)
		case leader != 0 && st.Leader != leader:
			return fmt.Errorf("members disagree on the leader")
		}
		leader = st.Leader
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := cli.Put(pctx, "/leasekit-test/ready", "1")
	return err
}

// leader returns the member that is the leader, as the members see it.
func (c *cluster) leader(ctx context.Context, cli *clientv3.Client) *etcdNode {
	c.t.Helper()
	for _, nd := range c.nodes {
		if nd.cmd == nil {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, nd.client)
		cancel()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return nd
		}
	}
	c.t.Fatalf("no member reports itself leader")
	return nil
}

// others returns the running members other than nd.
func (c *cluster) others(nd *etcdNode) []*etcdNode {
	var out []*etcdNode
	for _, o := range c.nodes {
		if o != nd && o.cmd != nil {
			out = append(out, o)
		}
	}
	return out
}

// dumpLogs logs the end of every member's log.
func (c *cluster) dumpLogs() {
	for _, nd := range c.nodes {
		b, _ := os.ReadFile(nd.logPath)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		c.t.Logf("etcd %s log (end):\n%s", nd.name, b)
	}
}

// clientEndpoints returns the client endpoints of nodes.
func clientEndpoints(nodes ...*etcdNode) []string {
	var eps []string
	for _, nd := range nodes {
		eps = append(eps, nd.client)
	}
	return eps
}
