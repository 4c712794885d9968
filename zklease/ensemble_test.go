// A private three-node ZooKeeper ensemble on loopback: the conformance suite
// on it, a lease that survives the loss of its server, and a lease whose
// session is expired from outside.

package zklease_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/zklease"
)

// zkServer is one server process of the ensemble.
type zkServer struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// kill stops the server at once (SIGKILL) and waits for it to exit.
func (s *zkServer) kill(t testing.TB) {
	t.Helper()
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("ZooKeeper server %s did not exit after SIGKILL", s.addr)
	}
}

// freePorts returns n distinct free loopback ports.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// startEnsemble starts three ZooKeeper servers (quorum peers) on loopback
// ports, with data in t.TempDir(), killed at cleanup, and returns them once
// the ensemble serves writes.
func startEnsemble(t *testing.T) []*zkServer {
	t.Helper()
	java := leasetest.Env(t, "LEASE_TEST_JAVA")
	cp := leasetest.Env(t, "LEASE_TEST_ZK_CLASSPATH")
	ports := freePorts(t, 9) // client, peer, election port per server
	var members strings.Builder
	for i := range 3 {
		fmt.Fprintf(&members, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[3+i], ports[6+i])
	}
	dir := t.TempDir()
	var srvs []*zkServer
	for i := range 3 {
		sdir := filepath.Join(dir, fmt.Sprintf("zk%d", i+1))
		data := filepath.Join(sdir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), fmt.Appendf(nil, "%d\n", i+1), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf(`tickTime=500
initLimit=20
syncLimit=10
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=60000
forceSync=no
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
%s`, data, ports[i], members.String())
		cfgPath := filepath.Join(sdir, "zoo.cfg")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(sdir, "server.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(java, "-Xms32m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false",
			"-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting ZooKeeper server %d: %v", i+1, err)
		}
		srv := &zkServer{addr: fmt.Sprintf("127.0.0.1:%d", ports[i]), cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); _ = logf.Close(); close(srv.done) }()
		t.Cleanup(func() { srv.kill(t) })
		srvs = append(srvs, srv)
	}
	// Ready once a store can acquire and release a key (a quorum write).
	ctx := testCtx(t, 90*time.Second)
	for {
		err := probe(ctx, addrs(srvs))
		if err == nil {
			return srvs
		}
		if ctx.Err() != nil {
			t.Fatalf("the ensemble %v did not serve writes within 90s: %v", addrs(srvs), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func probe(ctx context.Context, srvs []string) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := zklease.Dial(dctx, srvs, testSession, zklease.WithRoot("/leasekit-probe"))
	if err != nil {
		return err
	}
	defer s.Close()
	r := lease.Request{Key: "probe", Token: token(), Holder: "probe", TTL: time.Second}
	if _, err := s.Acquire(dctx, r); err != nil {
		return err
	}
	return s.Release(dctx, r)
}

func addrs(srvs []*zkServer) []string {
	var a []string
	for _, s := range srvs {
		a = append(a, s.addr)
	}
	return a
}

func newClient(t *testing.T, s lease.Store, opts ...lease.Option) *lease.Client {
	t.Helper()
	c, err := lease.New(s, opts...)
	if err != nil {
		t.Fatalf("lease.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestEnsemble(t *testing.T) {
	srvs := startEnsemble(t)
	all := addrs(srvs)
	t.Logf("ensemble: %v", all)

	t.Run("Conformance", func(t *testing.T) { runSuite(t, all, ensembleTTL, ensembleSession) })
	t.Run("SessionExpiry", func(t *testing.T) { testSessionExpiry(t, all) })
	// Last: it leaves the ensemble with two servers.
	t.Run("KillServer", func(t *testing.T) { testKillServer(t, srvs) })
}

// testKillServer: the server the holder's session is connected to is killed;
// the client moves to another server within the session timeout and the
// lease survives, renewed, with the same fence.
func testKillServer(t *testing.T, srvs []*zkServer) {
	ctx := testCtx(t, 60*time.Second)
	const ttl = 3 * time.Second
	hs := dial(t, addrs(srvs), zklease.WithRoot(root("kill")))
	ostore := dial(t, addrs(srvs), zklease.WithRoot(hs.Root()))
	rec := &leasetest.Recorder{}
	holder := newClient(t, hs, lease.WithTTL(ttl), lease.WithObserver(rec), lease.WithHolder("holder"))
	other := newClient(t, ostore, lease.WithTTL(ttl))
	key := "kill-" + randHex(4)
	l, err := holder.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	before := hs.Conn().Server()
	var victim *zkServer
	for _, s := range srvs {
		if s.addr == before {
			victim = s
		}
	}
	if victim == nil {
		t.Fatalf("the holder's server %q is not one of the ensemble's", before)
	}
	mark := rec.Len()
	killed := time.Now()
	victim.kill(t)
	t.Logf("killed %s, the holder's server", before)

	// Three TTLs later the lease is still held and was renewed meanwhile.
	time.Sleep(3 * ttl)
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost after its server was killed: %v", err)
	}
	renewed := rec.Count(mark, leasetest.Kind("", lease.EventRenewed))
	if renewed < 3 {
		t.Errorf("%d renewals in the %v after the kill, want at least 3", renewed, time.Since(killed).Round(time.Millisecond))
	}
	after := hs.Conn().Server()
	if after == before {
		t.Errorf("the holder is still on the killed server %s", before)
	}
	t.Logf("holder moved from %s to %s; %d renewals since the kill", before, after, renewed)
	_, err = other.TryAcquire(ctx, key)
	var he *lease.HeldError
	if !errors.As(err, &he) || he.Fence != l.Fence() || he.Holder != "holder" {
		t.Errorf("another client's TryAcquire = %v, want a HeldError by %q with fence %d", err, "holder", l.Fence())
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// testSessionExpiry: the holder's session is closed from outside (a second
// connection takes the session over with its id and password and closes
// it, the classic way to expire a session on purpose). ZooKeeper deletes the
// holder's node; the Client reports the lease lost and cancels its Context,
// and a waiter of another client acquires the key.
func testSessionExpiry(t *testing.T, all []string) {
	ctx := testCtx(t, 60*time.Second)
	const ttl = 2 * time.Second
	sn := &sniffer{}
	hs := dial(t, all, zklease.WithRoot(root("expiry")), zklease.WithDialer(sn.dial))
	ws := dial(t, all, zklease.WithRoot(hs.Root()))
	rec := &leasetest.Recorder{}
	holder := newClient(t, hs, lease.WithTTL(ttl), lease.WithObserver(rec))
	waiter := newClient(t, ws, lease.WithTTL(ttl))
	key := "expiry-" + randHex(4)
	l, err := holder.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	type result struct {
		l   *lease.Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		wl, err := waiter.Acquire(ctx, key)
		got <- result{wl, err, time.Now()}
	}()
	time.Sleep(ttl) // the waiter is waiting; the holder renews
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost before the session was expired: %v", err)
	}
	id, passwd, server := sn.session()
	if id != hs.Conn().SessionID() {
		t.Fatalf("sniffed session %#x, the store's session is %#x", id, hs.Conn().SessionID())
	}
	expired := time.Now()
	if err := closeSession(server, id, passwd); err != nil {
		t.Fatalf("closing the holder's session from outside: %v", err)
	}

	const bound = 10 * time.Second
	select {
	case <-l.Context().Done():
	case <-time.After(bound):
		t.Fatalf("the lease was not lost within %v of its session's end (Err() = %v)", bound, l.Err())
	}
	lostAfter := time.Since(expired)
	if !errors.Is(l.Err(), lease.ErrLost) || !errors.Is(context.Cause(l.Context()), lease.ErrLost) {
		t.Errorf("after the session ended: Err() = %v, Context cause = %v; want ErrLost", l.Err(), context.Cause(l.Context()))
	}
	ev, _, ok := rec.Find(0, 0, leasetest.Kind("", lease.EventLost))
	if !ok {
		t.Errorf("no EventLost")
	} else if ev.Reason != lease.LossSession && ev.Reason != lease.LossNotHeld {
		t.Errorf("EventLost reason %q, want %q (or %q if a renewal saw the node gone first)", ev.Reason, lease.LossSession, lease.LossNotHeld)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("waiter's Acquire: %v", r.err)
		}
		if r.l.Fence() <= l.Fence() {
			t.Errorf("waiter's fence %d, want > %d", r.l.Fence(), l.Fence())
		}
		t.Logf("session closed: lease lost after %v (reason %q), waiter acquired after %v",
			lostAfter.Round(time.Millisecond), ev.Reason, r.at.Sub(expired).Round(time.Millisecond))
	case <-time.After(bound):
		t.Fatalf("the waiter did not acquire within %v of the session's end", bound)
	}
}

// sniffer is a zk.Dialer that remembers the session id and password from
// the handshake response of the last connection it made.
type sniffer struct {
	mu     sync.Mutex
	id     int64
	passwd []byte
	server string
}

func (s *sniffer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, s: s, addr: addr}, nil
}

func (s *sniffer) session() (int64, []byte, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.passwd, s.server
}

// sniffConn parses the first packet it reads: the connect response
// (length, protocol version, timeout, session id, password).
type sniffConn struct {
	net.Conn
	s    *sniffer
	addr string
	buf  []byte
	done bool
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.done && n > 0 {
		c.buf = append(c.buf, p[:n]...)
		if len(c.buf) >= 24 {
			plen := int(binary.BigEndian.Uint32(c.buf[20:24]))
			if len(c.buf) >= 24+plen {
				c.done = true
				c.s.mu.Lock()
				c.s.id = int64(binary.BigEndian.Uint64(c.buf[12:20]))
				c.s.passwd = append([]byte(nil), c.buf[24:24+plen]...)
				c.s.server = c.addr
				c.s.mu.Unlock()
			}
		}
	}
	return n, err
}

// closeSession connects to server with the given session id and password
// and sends closeSession: the server ends the session and deletes its
// ephemeral nodes.
func closeSession(server string, id int64, passwd []byte) error {
	c, err := net.DialTimeout("tcp", server, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd.
	req := binary.BigEndian.AppendUint32(nil, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, uint32(testSession/time.Millisecond))
	req = binary.BigEndian.AppendUint64(req, uint64(id))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	if err := writePacket(c, req); err != nil {
		return err
	}
	resp, err := readPacket(c)
	if err != nil {
		return fmt.Errorf("connect response: %w", err)
	}
	if len(resp) < 16 || int64(binary.BigEndian.Uint64(resp[8:16])) != id {
		return fmt.Errorf("the server did not resume session %#x", id)
	}
	// closeSession: xid 1, type -11.
	hdr := binary.BigEndian.AppendUint32(nil, 1)
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(0xFFFFFFF5))
	if err := writePacket(c, hdr); err != nil {
		return err
	}
	resp, err = readPacket(c)
	if err != nil {
		return fmt.Errorf("close response: %w", err)
	}
	if len(resp) < 16 || binary.BigEndian.Uint32(resp[12:16]) != 0 {
		return fmt.Errorf("closeSession failed: % x", resp)
	}
	return nil
}

func writePacket(w io.Writer, p []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...))
	return err
}

func readPacket(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(n[:]))
	_, err := io.ReadFull(r, p)
	return p, err
}
