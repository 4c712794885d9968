// Real network partitions (netns.go): every worker in a network namespace
// of its own, joined to the root namespace by a veth pair and a bridge; the
// nemesis drops packets with nftables in the holder's namespace. The shared
// servers stay in the root namespace and are reached through relays on the
// bridge; the private etcd cluster and ZooKeeper ensemble run each member in
// a namespace of its own, so that the leader can be isolated with the
// holder. Run them alone with
//
//	go test -race -count=1 -p 1 -run 'TestPartition' -v ./verify/

package verify_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasekit/lease/internal/zktest"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/verify"
)

// newNet creates a private network removed at cleanup, or skips the test
// where the kernel refuses network namespaces.
func newNet(t *testing.T) *verify.Net {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := verify.NewNet(ctx)
	if errors.Is(err, verify.ErrNoNamespaces) {
		t.Skipf("network namespaces refused here (the partition tests need root, ip and nft): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("removing the network: %v", err)
		}
	})
	return n
}

// partitionDuration is a partition test's run: LEASE_VERIFY_DURATION, or
// long enough for every fault in turn at CI size.
func partitionDuration(t *testing.T, ci time.Duration) time.Duration {
	if os.Getenv("LEASE_VERIFY_DURATION") != "" {
		return runDuration(t)
	}
	return ci
}

// workerFaults, the shortest first: on a loaded CI machine the last one
// comes late in the run.
var workerFaults = []string{verify.FaultPartitionHeal, verify.FaultPartition, verify.FaultOneWay, verify.FaultLoss}

// partitionWorkers runs the worker faults in turn on cfg's store, reached
// through relays from a new network (cfg.Net, unless set), for ci at CI
// size, and checks the run. The register stays a file: a worker cut off
// from the store can still write the resource, which is what fencing must
// catch.
func partitionWorkers(t *testing.T, cfg verify.Config, ci time.Duration) {
	t.Helper()
	if cfg.Net == nil {
		cfg.Net = newNet(t)
	}
	cfg.Faults, cfg.Duration = workerFaults, partitionDuration(t, ci)
	check(t, run(t, cfg), workerFaults...)
}

func TestPartitionRedis(t *testing.T) {
	t.Parallel()
	partitionWorkers(t, verify.Config{Store: redisURL(t), TTL: time.Second}, 40*time.Second)
}

func TestPartitionPostgres(t *testing.T) {
	t.Parallel()
	partitionWorkers(t, verify.Config{Store: postgresURL(t, ""), TTL: time.Second}, 40*time.Second)
}

func TestPartitionEtcd(t *testing.T) {
	t.Parallel()
	partitionWorkers(t, verify.Config{Store: etcdURL(t), TTL: 2 * time.Second}, 55*time.Second)
}

func TestPartitionZooKeeper(t *testing.T) {
	t.Parallel()
	partitionWorkers(t, verify.Config{Store: zkURL(t), TTL: time.Second}, 40*time.Second)
}

// TestPartitionPostgresAdvisory: the lock lives as long as the holder's
// session, which the relay keeps open: idle_session_timeout (the TTL) must
// end it.
func TestPartitionPostgresAdvisory(t *testing.T) {
	t.Parallel()
	partitionWorkers(t, verify.Config{Store: postgresURL(t, "advisory"), TTL: time.Second}, 40*time.Second)
}

func TestPartitionMySQL(t *testing.T) {
	t.Parallel()
	partitionWorkers(t, verify.Config{Store: mysqlURL(t, "table"), TTL: time.Second}, 40*time.Second)
}

// TestPartitionMySQLGetLock: the same with a connection's wait_timeout.
func TestPartitionMySQLGetLock(t *testing.T) {
	t.Parallel()
	partitionWorkers(t, verify.Config{Store: mysqlURL(t, "getlock"), TTL: time.Second}, 40*time.Second)
}

func TestPartitionNATS(t *testing.T) {
	t.Parallel()
	partitionWorkers(t, verify.Config{Store: natsURL(t), TTL: time.Second}, 40*time.Second)
}

// TestPartitionK8s: the kube-apiserver of LEASE_TEST_K8S_KUBECONFIG, through
// a relay (k8sRelayed). Named for scripts/test's -run K8s step.
func TestPartitionK8s(t *testing.T) {
	t.Parallel()
	store := k8sURL(t)
	n := newNet(t)
	partitionWorkers(t, verify.Config{Store: k8sRelayed(t, n, store), TTL: time.Second, Net: n}, 40*time.Second)
}

// k8sRelayed returns store (a k8s:// URL) with a copy of its kubeconfig
// whose loopback apiservers are relays on n, the original host kept as
// tls-server-name (docs/RELIABILITY.md, "Real network partitions").
func k8sRelayed(t *testing.T, n *verify.Net, store string) string {
	t.Helper()
	u, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	cfg, err := clientcmd.LoadFromFile(q.Get("kubeconfig"))
	if err == nil {
		err = clientcmd.ResolveLocalPaths(cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range cfg.Clusters {
		su, err := url.Parse(c.Server)
		if err != nil {
			t.Fatalf("cluster %s: %v", name, err)
		}
		relayed, err := n.Reach("https://" + su.Host)
		if err != nil {
			t.Fatal(err)
		}
		ru, _ := url.Parse(relayed)
		if ru.Host == su.Host {
			continue
		}
		if c.TLSServerName == "" {
			c.TLSServerName = su.Hostname()
		}
		su.Host = ru.Host
		c.Server = su.String()
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	q.Set("kubeconfig", path)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestPartitionEtcdClusterLeader: a private three-member etcd cluster, each
// member in a namespace of its own; the nemesis isolates the leader together
// with the holder (the two still reach each other), and partitions the
// holder alone.
func TestPartitionEtcdClusterLeader(t *testing.T) {
	t.Parallel()
	bin := leasetest.Env(t, "LEASE_TEST_ETCD_BIN")
	n := newNet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &etcdCluster{t: t, bin: "ip"}
	dir := t.TempDir()
	var hosts []*verify.Host
	var initial []string
	for i := 0; i < 3; i++ {
		h, err := n.AddHost(ctx, fmt.Sprintf("etcd%d", i))
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
		initial = append(initial, fmt.Sprintf("m%d=http://%s:2380", i, h.IP))
	}
	token := fmt.Sprintf("verify-netns-%d", time.Now().UnixNano())
	for i, h := range hosts {
		client, peer := h.IP+":2379", "http://"+h.IP+":2380"
		c.members = append(c.members, &etcdMember{name: fmt.Sprintf("m%d", i), client: client, args: h.Command(bin,
			"--name", fmt.Sprintf("m%d", i), "--data-dir", filepath.Join(dir, fmt.Sprintf("m%d", i)),
			"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--logger", "zap", "--log-outputs", filepath.Join(dir, fmt.Sprintf("m%d.log", i)), "--log-level", "warn",
		)[1:]}) // c.bin is "ip"
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
		t.Fatal(err)
	}
	leaders := map[string]int{}
	n.Leader = func(ctx context.Context) (*verify.Host, error) {
		m, err := c.leader(ctx)
		if err != nil {
			return nil, err
		}
		for i, mm := range c.members {
			if mm == m {
				leaders[m.name]++
				return hosts[i], nil
			}
		}
		return nil, fmt.Errorf("leader %s is not a member", m.name)
	}
	rep := run(t, verify.Config{Store: "etcd://" + strings.Join(c.endpoints(), ","), TTL: 2 * time.Second, Net: n,
		Duration: partitionDuration(t, 45*time.Second),
		Faults:   []string{verify.FaultLeaderPartition, verify.FaultPartition}})
	check(t, rep, verify.FaultLeaderPartition, verify.FaultPartition)
	t.Logf("leaders isolated: %v", leaders)
}

// TestPartitionZooKeeperEnsembleLeader: the same on a private three-server
// ZooKeeper ensemble, each server in a namespace of its own.
func TestPartitionZooKeeperEnsembleLeader(t *testing.T) {
	t.Parallel()
	leasetest.Env(t, "LEASE_TEST_JAVA")
	n := newNet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var hosts []*verify.Host
	var o zktest.Options
	for i := 0; i < 3; i++ {
		h, err := n.AddHost(ctx, fmt.Sprintf("zk%d", i+1))
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
		o.Hosts[i] = h.IP
	}
	o.Command = func(id int, argv []string) []string { return hosts[id-1].Command(argv...) }
	e := zktest.StartWith(t, o)
	leaders := map[int]int{}
	n.Leader = func(ctx context.Context) (*verify.Host, error) {
		s, err := e.Leader(ctx)
		if err != nil {
			return nil, err
		}
		leaders[s.ID]++
		return hosts[s.ID-1], nil
	}
	rep := run(t, verify.Config{Store: "zk://" + strings.Join(e.Addrs(), ",") + "?session_timeout=8s", TTL: 2 * time.Second,
		Net: n, Duration: partitionDuration(t, 45*time.Second),
		Faults: []string{verify.FaultLeaderPartition, verify.FaultPartition}})
	check(t, rep, verify.FaultLeaderPartition, verify.FaultPartition)
	t.Logf("leaders isolated (server id: times): %v", leaders)
}

// TestPartitionNetCleanup: the rules come and go with Partition and Heal,
// and Close leaves no namespace, bridge address or relay behind.
func TestPartitionNetCleanup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := verify.NewNet(ctx)
	if errors.Is(err, verify.ErrNoNamespaces) {
		t.Skipf("network namespaces refused here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = n.Close()
		}
	}()
	h, err := n.AddHost(ctx, "probe")
	if err != nil {
		t.Fatal(err)
	}
	rules := func() bool {
		return exec.CommandContext(ctx, "ip", "netns", "exec", h.Name, "nft", "list", "table", "netdev", "leasekit").Run() == nil
	}
	if err := h.Partition(ctx); err != nil || !rules() {
		t.Fatalf("Partition: %v; rules present: %v", err, rules())
	}
	if err := h.Heal(ctx); err != nil || rules() {
		t.Fatalf("Heal: %v; rules present: %v", err, rules())
	}
	relayed, err := n.Reach("redis://127.0.0.1:6379/0")
	if err != nil || !strings.Contains(relayed, n.BridgeIP()+":") {
		t.Fatalf("Reach: %q, %v; want a relay on %s", relayed, err, n.BridgeIP())
	}
	u, _ := url.Parse(relayed)
	closed = true
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + h.Name); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("namespace %s still there after Close: %v", h.Name, err)
	}
	out, err := exec.CommandContext(ctx, "ip", "-4", "-o", "addr", "show").Output()
	if err != nil || strings.Contains(string(out), " "+n.BridgeIP()+"/") {
		t.Errorf("bridge address %s still assigned after Close (%v):\n%s", n.BridgeIP(), err, out)
	}
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Errorf("relay %s still accepts after Close", u.Host)
	}
}
