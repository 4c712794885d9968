// Real network partitions: workers (and, for the cluster tests, store
// servers) in network namespaces of their own, joined by veth pairs to a
// bridge in the root namespace; the nemesis drops packets with nftables
// inside a namespace.

package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Network fault kinds (Config.Net must be set).
const (
	// FaultPartition drops every packet to and from the holder's namespace
	// for 1.5×TTL. The holder still reaches the register (a local file),
	// as a process cut off from the lock service but not from the resource
	// would.
	FaultPartition = "partition"
	// FaultOneWay drops the packets that reach the holder's namespace for
	// 1.5×TTL: its requests reach the store (and take effect there), the
	// replies do not.
	FaultOneWay = "one-way loss"
	// FaultLoss drops 30 % of the packets in each direction of the holder's
	// namespace, at random, for 2×TTL.
	FaultLoss = "30% loss"
	// FaultPartitionHeal partitions the holder for between TTL/4 and
	// 2×TTL/3 and heals the partition while a renewal is in flight (the
	// renewal's retransmission arrives after the heal).
	FaultPartitionHeal = "partition healed mid-renewal"
	// FaultLeaderPartition isolates the store's leader (Net.Leader) together
	// with the holder: the two still reach each other, nobody else reaches
	// either, for max(3×TTL, 6s).
	FaultLeaderPartition = "leader+holder partition"
)

// NetFaults are the network fault kinds, in the order the report lists them.
var NetFaults = []string{FaultPartition, FaultOneWay, FaultLoss, FaultPartitionHeal, FaultLeaderPartition}

// ErrNoNamespaces matches the error of NewNet where the kernel (or the
// missing ip/nft tools, or missing privileges) refuses network namespaces.
var ErrNoNamespaces = errors.New("verify: network namespaces are not available")

// Net is a private network: a bridge in the root namespace with an address
// in 10.200.0.0/13 (a /24 of its own), and hosts, each a network namespace
// joined to the bridge by a veth pair. Stores that listen on loopback in the
// root namespace are reached through relays (small TCP forwarders) on the
// bridge's address. Close removes all of it; namespaces that a process
// which died without Close left behind are removed by the next NewNet.
type Net struct {
	// Leader, if set, returns the host of the store's current leader (a
	// store server started in a namespace of this network with Host.Command),
	// for FaultLeaderPartition.
	Leader func(ctx context.Context) (*Host, error)

	id     string // random hex, in every name
	bridge string
	prefix string // "10.a.b."

	mu     sync.Mutex
	hosts  []*Host
	relays map[string]*proxy // loopback target -> relay on the bridge
	closed bool
}

// Host is a network namespace on a Net.
type Host struct {
	// Name is the namespace's name (for ip netns exec).
	Name string
	// IP is its address on the bridge.
	IP string
	n  *Net
}

const nsPrefix = "leasekit-"

// subnetMu keeps two NewNet calls of this process (parallel tests) from
// choosing the same free subnet at once.
var subnetMu sync.Mutex

// NewNet creates a bridge with a free private /24; it returns an error
// matching ErrNoNamespaces where namespaces, veth pairs or nftables are not
// available. The caller must Close it.
func NewNet(ctx context.Context) (*Net, error) {
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: %s is not installed (Debian: iproute2, nftables): %v", ErrNoNamespaces, tool, err)
		}
	}
	sweep(ctx)
	n := &Net{id: randHex(3), relays: map[string]*proxy{}}
	n.bridge = "lkb" + n.id
	subnetMu.Lock()
	defer subnetMu.Unlock()
	used, err := usedPrefixes(ctx)
	if err != nil {
		return nil, err
	}
	for i := 0; i < 100; i++ {
		p := fmt.Sprintf("10.%d.%d.", 200+rand.IntN(8), rand.IntN(256))
		if !used[p] {
			n.prefix = p
			break
		}
	}
	if n.prefix == "" {
		return nil, errors.New("verify: no free 10.200.0.0/13 subnet")
	}
	if err := ipCmd(ctx, "link", "add", n.bridge, "type", "bridge"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNamespaces, err)
	}
	err = errors.Join(
		// The alias names the creating process, so that sweep can remove a
		// bridge whose creator died.
		ipCmd(ctx, "link", "set", "dev", n.bridge, "alias", fmt.Sprintf("%s%d", nsPrefix, os.Getpid())),
		ipCmd(ctx, "addr", "add", n.prefix+"1/24", "dev", n.bridge),
		ipCmd(ctx, "link", "set", n.bridge, "up"))
	if err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

// BridgeIP is the root namespace's address on the network.
func (n *Net) BridgeIP() string { return n.prefix + "1" }

// AddHost creates a namespace joined to the bridge, with loopback up and an
// address of its own; name must be short and unique on n.
func (n *Net) AddHost(ctx context.Context, name string) (*Host, error) {
	n.mu.Lock()
	idx := len(n.hosts)
	if n.closed || idx > 200 {
		n.mu.Unlock()
		return nil, errors.New("verify: network closed or full")
	}
	h := &Host{Name: fmt.Sprintf("%s%d-%s-%s", nsPrefix, os.Getpid(), n.id, name), IP: fmt.Sprintf("%s%d", n.prefix, 10+idx), n: n}
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()
	veth := fmt.Sprintf("lkv%s%d", n.id, idx)
	err := ipCmd(ctx, "netns", "add", h.Name)
	if err == nil {
		err = errors.Join(
			ipCmd(ctx, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.Name),
			ipCmd(ctx, "link", "set", veth, "master", n.bridge, "up"),
			ipCmd(ctx, "-n", h.Name, "addr", "add", h.IP+"/24", "dev", "eth0"),
			ipCmd(ctx, "-n", h.Name, "link", "set", "eth0", "up"),
			ipCmd(ctx, "-n", h.Name, "link", "set", "lo", "up"))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNamespaces, err)
	}
	return h, nil
}

// Command returns argv run inside the host's namespace.
func (h *Host) Command(argv ...string) []string {
	return append([]string{"ip", "netns", "exec", h.Name}, argv...)
}

// rules replaces the host's packet filter: "" removes it (heals). The
// rules filter at the namespace's end of the veth (netdev ingress and
// egress), so a dropped packet is lost on the wire, as in a real partition,
// rather than refused to the sender.
func (h *Host) rules(ctx context.Context, ingress, egress string) error {
	script := "table netdev leasekit\ndelete table netdev leasekit\n"
	if ingress != "" || egress != "" {
		script += fmt.Sprintf(`table netdev leasekit {
	chain in {
		type filter hook ingress device "eth0" priority 0; policy accept;
		%s
	}
	chain out {
		type filter hook egress device "eth0" priority 0; policy accept;
		%s
	}
}
`, ingress, egress)
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.Name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("verify: nft in %s: %v: %s", h.Name, err, bytes.TrimSpace(out))
	}
	return nil
}

// Partition drops every IPv4 packet to and from the host.
func (h *Host) Partition(ctx context.Context) error {
	return h.rules(ctx, "meta protocol ip drop", "meta protocol ip drop")
}

// DropIncoming drops every IPv4 packet that reaches the host; what it sends
// still arrives.
func (h *Host) DropIncoming(ctx context.Context) error {
	return h.rules(ctx, "meta protocol ip drop", "")
}

// Loss drops pct % of the IPv4 packets in each direction, at random.
func (h *Host) Loss(ctx context.Context, pct int) error {
	r := fmt.Sprintf("meta protocol ip numgen random mod 100 < %d drop", pct)
	return h.rules(ctx, r, r)
}

// OnlyWith drops every IPv4 packet except those to and from peer.
func (h *Host) OnlyWith(ctx context.Context, peer *Host) error {
	return h.rules(ctx, fmt.Sprintf("meta protocol ip ip saddr != %s drop", peer.IP),
		fmt.Sprintf("meta protocol ip ip daddr != %s drop", peer.IP))
}

// Heal removes the host's packet filter.
func (h *Host) Heal(ctx context.Context) error { return h.rules(ctx, "", "") }

// Reach rewrites a store URL for a worker on the network: every loopback
// host (127.0.0.1, localhost) is replaced by a relay on the bridge that
// forwards to it; other hosts (store servers on the network) stay.
func (n *Net) Reach(store string) (string, error) {
	u, err := url.Parse(store)
	if err != nil || u.Host == "" {
		return store, nil // file and mem stores: nothing to reach
	}
	var hosts []string
	for _, hp := range strings.Split(u.Host, ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || (host != "127.0.0.1" && host != "localhost") {
			hosts = append(hosts, hp)
			continue
		}
		target := net.JoinHostPort("127.0.0.1", port)
		n.mu.Lock()
		p := n.relays[target]
		if p == nil && !n.closed {
			p, err = newProxyAt(net.JoinHostPort(n.BridgeIP(), "0"), target)
			if err != nil {
				n.mu.Unlock()
				return "", err
			}
			n.relays[target] = p
		}
		n.mu.Unlock()
		if p == nil {
			return "", errors.New("verify: network closed")
		}
		hosts = append(hosts, p.Addr())
	}
	u.Host = strings.Join(hosts, ",")
	return u.String(), nil
}

// Close stops the relays and removes the namespaces (with their veth
// pairs and rules) and the bridge.
func (n *Net) Close() error {
	n.mu.Lock()
	n.closed = true
	hosts, relays := n.hosts, n.relays
	n.hosts, n.relays = nil, map[string]*proxy{}
	n.mu.Unlock()
	for _, p := range relays {
		p.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, h := range hosts {
		if err := ipCmd(ctx, "netns", "del", h.Name); err != nil && nsExists(h.Name) {
			errs = append(errs, err)
		}
	}
	if err := ipCmd(ctx, "link", "del", n.bridge); err != nil && linkExists(n.bridge) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func nsExists(name string) bool {
	_, err := os.Stat("/run/netns/" + name)
	return err == nil
}

func linkExists(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

// usedPrefixes returns the "10.a.b." prefixes of the IPv4 addresses in the
// root namespace.
func usedPrefixes(ctx context.Context) (map[string]bool, error) {
	out, err := exec.CommandContext(ctx, "ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("%w: ip addr: %v", ErrNoNamespaces, err)
	}
	used := map[string]bool{}
	for _, f := range strings.Fields(string(out)) {
		if ip, _, err := net.ParseCIDR(f); err == nil {
			if v4 := ip.To4(); v4 != nil {
				used[fmt.Sprintf("%d.%d.%d.", v4[0], v4[1], v4[2])] = true
			}
		}
	}
	return used, nil
}

// pidAlive reports whether the process exists.
func pidAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// sweep removes the namespaces and bridges of processes that died without
// closing their Net (a test binary killed by its timeout).
func sweep(ctx context.Context) {
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			rest, ok := strings.CutPrefix(e.Name(), nsPrefix)
			if !ok {
				continue
			}
			pidS, _, _ := strings.Cut(rest, "-")
			if pid, err := strconv.Atoi(pidS); err == nil && !pidAlive(pid) {
				_ = ipCmd(ctx, "netns", "del", e.Name())
			}
		}
	}
	if ents, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), "lkb") {
				continue
			}
			alias, err := os.ReadFile("/sys/class/net/" + e.Name() + "/ifalias")
			rest, ok := strings.CutPrefix(strings.TrimSpace(string(alias)), nsPrefix)
			if err != nil || !ok {
				continue
			}
			if pid, err := strconv.Atoi(rest); err == nil && !pidAlive(pid) {
				_ = ipCmd(ctx, "link", "del", e.Name())
			}
		}
	}
}

// setupNet puts every worker in a namespace of its own on cfg.Net and
// returns the store URL the workers use.
func (r *runner) setupNet(ctx context.Context) (string, error) {
	n := r.cfg.Net
	store, err := n.Reach(r.cfg.Store)
	if err != nil {
		return "", err
	}
	for i := 0; i < r.cfg.Workers; i++ {
		h, err := n.AddHost(ctx, fmt.Sprintf("w%d", i))
		if err != nil {
			return "", err
		}
		r.hosts = append(r.hosts, h)
	}
	return store, nil
}

// injectNet injects one network fault into the holder's namespace (or, when
// there is no holder within 2×TTL, a worker's) and reports whether it did.
func (r *runner) injectNet(ctx context.Context, kind string) bool {
	if len(r.hosts) == 0 {
		return false
	}
	ttl := r.cfg.TTL
	id, fence, w := r.holderWithin(ctx, 2*ttl)
	if w == nil {
		id = rand.IntN(len(r.hosts))
	}
	h := r.hosts[id]
	// Healing must happen even when the run ends meanwhile.
	heal := func(hs ...*Host) {
		hctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, h := range hs {
			if err := h.Heal(hctx); err != nil {
				r.log("verify: healing %s: %v", h.Name, err)
			}
		}
	}
	var err error
	switch kind {
	case FaultPartition, FaultOneWay:
		if kind == FaultPartition {
			err = h.Partition(ctx)
		} else {
			err = h.DropIncoming(ctx)
		}
		if err != nil {
			r.log("verify: %s of worker %d: %v", kind, id, err)
			return false
		}
		if w != nil {
			r.note(kind, fence, time.Now().UnixNano())
		}
		r.log("verify: %s of worker %d (fence %d, holder %v) for %v", kind, id, fence, w != nil, 3*ttl/2)
		waitFor(ctx, 3*ttl/2)
		heal(h)
		return true
	case FaultLoss:
		if err = h.Loss(ctx, 30); err != nil {
			r.log("verify: loss for worker %d: %v", id, err)
			return false
		}
		r.log("verify: 30%% loss for worker %d (holder %v) for %v", id, w != nil, 2*ttl)
		waitFor(ctx, 2*ttl)
		heal(h)
		return true
	case FaultPartitionHeal:
		d := ttl/4 + time.Duration(rand.Int64N(int64(5*ttl/12)))
		if err = h.Partition(ctx); err != nil {
			r.log("verify: partition of worker %d: %v", id, err)
			return false
		}
		r.log("verify: partition of worker %d (fence %d, holder %v), healed after %v", id, fence, w != nil, d)
		waitFor(context.Background(), d)
		heal(h)
		return true
	case FaultLeaderPartition:
		if r.cfg.Net.Leader == nil || w == nil {
			return false
		}
		l, err := r.cfg.Net.Leader(ctx)
		if err != nil {
			r.log("verify: finding the leader: %v", err)
			return false
		}
		if err := errors.Join(l.OnlyWith(ctx, h), h.OnlyWith(ctx, l)); err != nil {
			heal(l, h)
			r.log("verify: leader partition: %v", err)
			return false
		}
		d := max(3*ttl, 6*time.Second)
		r.log("verify: leader %s isolated with worker %d (fence %d) for %v", l.Name, id, fence, d)
		waitFor(ctx, d)
		heal(l, h)
		return true
	}
	return false
}
