// Advisory mode: the server frees a lock when the holder's connection is
// killed (pg_terminate_backend), and when the client vanishes without closing
// it (a blackholed proxy): the idle session is ended after the TTL.

package pglease_test

import (
	"errors"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/pglease"
)

// holderPID returns the server process of the session holding key.
func holderPID(t *testing.T, s pglease.Store, key string) int32 {
	t.Helper()
	pool := sharedPool(t)
	var pid int32
	err := pool.QueryRow(testCtx(t, 5*time.Second), "SELECT pid FROM "+s.Table()+" WHERE ns = $1 AND key = $2",
		s.Namespace(), key).Scan(&pid)
	if err != nil {
		t.Fatalf("holder's pid: %v", err)
	}
	return pid
}

// takeover polls TryAcquire until it succeeds or bound passes.
func takeover(t *testing.T, c *lease.Client, key string, bound time.Duration) (*lease.Lease, time.Duration) {
	t.Helper()
	start := time.Now()
	ctx := testCtx(t, bound+5*time.Second)
	for {
		l, err := c.TryAcquire(ctx, key)
		switch {
		case err == nil:
			return l, time.Since(start)
		case !errors.Is(err, lease.ErrHeld):
			t.Fatalf("TryAcquire: %v", err)
		case time.Since(start) > bound:
			t.Fatalf("the key was not free within %v", bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAdvisoryKilledBackend: the holder's server session is terminated; the
// lock is free at once (bound: 1s, with a 5s TTL), and the holder learns it
// at its next renewal.
func TestAdvisoryKilledBackend(t *testing.T) {
	const ttl = 5 * time.Second
	pool := sharedPool(t)
	ns := namespace(t)
	s := storeNS(t, pool, pglease.ModeAdvisory, ns)
	c1 := newClient(t, s, lease.WithTTL(ttl))
	c2 := newClient(t, storeNS(t, pool, pglease.ModeAdvisory, ns), lease.WithTTL(ttl))
	key := "killed-" + randHex(4)
	l, err := c1.TryAcquire(testCtx(t, 5*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	pid := holderPID(t, s, key)
	var ok bool
	if err := pool.QueryRow(testCtx(t, 5*time.Second), "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v, %v", pid, ok, err)
	}
	l2, took := takeover(t, c2, key, time.Second)
	t.Logf("taken over %v after the holder's backend was terminated (TTL %v)", took.Round(time.Millisecond), ttl)
	if l2.Fence() <= l.Fence() {
		t.Errorf("new fence %d, want > %d", l2.Fence(), l.Fence())
	}
	bound := ttl/3 + 2*time.Second // the next renewal finds the session gone
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), lease.ErrLost) {
			t.Errorf("holder's Err() = %v, want ErrLost", l.Err())
		}
	case <-time.After(bound):
		t.Fatalf("the holder was not told within %v", bound)
	}
}

// TestAdvisoryVanishedClient: the holder's connection goes through a proxy
// that stops forwarding without closing anything, as if the client host froze
// or dropped off the network. The server ends the idle session after the TTL
// (idle_session_timeout), so another client acquires after the TTL and within
// TTL + 1.5s; the holder itself reports the loss no later.
func TestAdvisoryVanishedClient(t *testing.T) {
	const ttl = time.Second
	dsn := sharedDSN(t)
	pool := sharedPool(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	px := startProxy(t, u.Host)
	u.Host = px.addr()
	holderPool := newPool(t, u.String(), 4)
	ns := namespace(t)
	c1 := newClient(t, storeNS(t, holderPool, pglease.ModeAdvisory, ns), lease.WithTTL(ttl))
	c2 := newClient(t, storeNS(t, pool, pglease.ModeAdvisory, ns), lease.WithTTL(ttl))
	key := "vanished-" + randHex(4)
	l, err := c1.TryAcquire(testCtx(t, 5*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl / 2) // a renewal or so goes through
	px.blackhole()
	cut := time.Now()
	l2, took := takeover(t, c2, key, ttl+1500*time.Millisecond)
	t.Logf("taken over %v after the holder's connection went silent (TTL %v)", took.Round(time.Millisecond), ttl)
	if took < ttl/2 {
		t.Errorf("taken over %v after the cut, too early for a TTL of %v", took, ttl)
	}
	if l2.Fence() <= l.Fence() {
		t.Errorf("new fence %d, want > %d", l2.Fence(), l.Fence())
	}
	select {
	case <-l.Done():
	default:
		t.Errorf("the key was taken over %v after the cut while its holder did not yet know it was lost", time.Since(cut))
	}
}

// proxy forwards TCP connections to a server until blackholed: then it drops
// every byte in both directions and keeps the connections open.
type proxy struct {
	ln     net.Listener
	to     string
	drop   atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, to string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, to: to}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) blackhole() { p.drop.Store(true) }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			// Accepted while close ran: close would not see it.
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

func (p *proxy) pipe(from, to net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && !p.drop.Load() {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or closed
		}
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
