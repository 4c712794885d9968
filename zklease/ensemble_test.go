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
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/zktest"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/zklease"
)

func newClient(t *testing.T, s driver.Store, opts ...lease.Option) *lease.Client {
	t.Helper()
	c, err := lease.New(s, opts...)
	if err != nil {
		t.Fatalf("lease.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestEnsemble(t *testing.T) {
	ens := zktest.Start(t) // serving, killed at cleanup
	srvs, all := ens.Servers, ens.Addrs()

	t.Run("Conformance", func(t *testing.T) { runSuite(t, all, ensembleTTL, ensembleSession) })
	t.Run("SessionExpiry", func(t *testing.T) { testSessionExpiry(t, all) })
	// Last: it leaves the ensemble with two servers.
	t.Run("KillServer", func(t *testing.T) { testKillServer(t, srvs, all) })
}

// testKillServer: the server the holder's session is connected to is killed;
// the client moves to another server within the session timeout and the
// lease survives, renewed, with the same fence.
func testKillServer(t *testing.T, srvs []*zktest.Server, all []string) {
	ctx := testCtx(t, 60*time.Second)
	const ttl = 3 * time.Second
	hs := dial(t, all, zklease.WithRoot(root("kill")))
	ostore := dial(t, all, zklease.WithRoot(hs.Root()))
	rec := &leasetest.Recorder{}
	holder := newClient(t, hs, lease.WithTTL(ttl), lease.WithObserver(rec), lease.WithHolder("holder"))
	other := newClient(t, ostore, lease.WithTTL(ttl))
	key := "kill-" + randHex(4)
	l, err := holder.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	before := hs.Conn().Server()
	var victim *zktest.Server
	for _, s := range srvs {
		if s.Addr == before {
			victim = s
		}
	}
	if victim == nil {
		t.Fatalf("the holder's server %q is not one of the ensemble's", before)
	}
	mark := rec.Len()
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}

	// Three TTLs later the lease is still held and was renewed meanwhile.
	time.Sleep(3 * ttl)
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost after its server was killed: %v", err)
	}
	if n := rec.Count(mark, leasetest.Kind("", lease.EventRenewed)); n < 3 || hs.Conn().Server() == before {
		t.Errorf("%d renewals after the kill (want 3 or more), on server %s (killed: %s)", n, hs.Conn().Server(), before)
	}
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
	got := make(chan *lease.Lease, 1)
	go func() {
		wl, err := waiter.Acquire(ctx, key)
		if err != nil {
			t.Errorf("waiter's Acquire: %v", err)
		}
		got <- wl
	}()
	time.Sleep(ttl) // the waiter is waiting; the holder renews
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost before the session was expired: %v", err)
	}
	id, passwd, server := sn.session()
	if id != hs.Conn().SessionID() {
		t.Fatalf("sniffed session %#x, the store's session is %#x", id, hs.Conn().SessionID())
	}
	if err := closeSession(server, id, passwd); err != nil {
		t.Fatalf("closing the holder's session from outside: %v", err)
	}

	const bound = 10 * time.Second
	select {
	case <-l.Context().Done():
	case <-time.After(bound):
		t.Fatalf("the lease was not lost within %v of its session's end (Err() = %v)", bound, l.Err())
	}
	if !errors.Is(l.Err(), lease.ErrLost) || !errors.Is(context.Cause(l.Context()), lease.ErrLost) {
		t.Errorf("after the session ended: Err() = %v, Context cause = %v; want ErrLost", l.Err(), context.Cause(l.Context()))
	}
	// The Context ends just before the observer gets the event: wait for it.
	ev, _, ok := rec.Find(0, 5*time.Second, leasetest.Kind("", lease.EventLost))
	if !ok {
		t.Errorf("no EventLost")
	} else if ev.Reason != lease.LossSession && ev.Reason != lease.LossNotHeld {
		t.Errorf("EventLost reason %q, want %q (or %q if a renewal saw the node gone first)", ev.Reason, lease.LossSession, lease.LossNotHeld)
	}
	select {
	case wl := <-got:
		if wl == nil || wl.Fence() <= l.Fence() {
			t.Errorf("waiter's lease %v, want a fence above %d", wl, l.Fence())
		}
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
