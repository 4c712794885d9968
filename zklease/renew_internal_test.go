// RenewMany's multis against a real server: the size estimate is the exact
// jute encoding of the request, multis come close to jute.maxbuffer without
// reaching it, their number is the floor the byte budget allows, and the
// session survives them.

package zklease

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
)

// writeLog records the size of every Write on a connection: go-zookeeper
// writes each request (length prefix included) with one Write.
type writeLog struct {
	mu    sync.Mutex
	sizes []int
}

func (w *writeLog) take() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.sizes
	w.sizes = nil
	return s
}

type loggingConn struct {
	net.Conn
	log *writeLog
}

// dialer dials connections whose writes w records.
func (w *writeLog) dialer(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return loggingConn{c, w}, nil
}

func (c loggingConn) Write(b []byte) (int, error) {
	c.log.mu.Lock()
	c.log.sizes = append(c.log.sizes, len(b))
	c.log.mu.Unlock()
	return c.Conn.Write(b)
}

func TestRenewManyMultiSize(t *testing.T) {
	srvs := strings.Split(leasetest.Env(t, "LEASE_TEST_ZK_SERVERS"), ",")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := &writeLog{}
	s, err := Dial(ctx, srvs, 6*time.Second, WithRoot(fmt.Sprintf("/leasekit-test/multisize-%d", time.Now().UnixNano())), WithDialer(log.dialer))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Long keys and holders: about 1.3 KB per renewal, so that 2,000
	// renewals (2.6 MB) need three multis of nearly 1 MiB.
	const n = 2000
	rs := make([]lease.Request, n)
	for i := range rs {
		rs[i] = lease.Request{
			Key:    fmt.Sprintf("key-%05d-%s", i, strings.Repeat("k", 500)),
			Token:  fmt.Sprintf("%032x", i+1),
			Holder: "holder-" + strings.Repeat("h", 400),
			TTL:    6 * time.Second,
		}
		if _, err := s.Acquire(ctx, rs[i]); err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		// Acquiring them all may take longer than the TTL on a loaded
		// machine: keep those acquired alive meanwhile.
		if i%200 == 199 {
			for j, err := range s.RenewMany(ctx, rs[:i+1]) {
				if err != nil {
					t.Fatalf("RenewMany[%d] while acquiring: %v", j, err)
				}
			}
		}
	}
	// What the multis must carry: the exact request bytes of every renewal.
	perOp := 0
	for _, r := range rs {
		g, ok := s.remembered(r)
		if !ok {
			t.Fatalf("no grant remembered for %q", r.Key[:10])
		}
		perOp += multiReqPerOp + len(g.path) + len(encodeData(r, false))
	}
	floor := (perOp + multiBudget - multiReqFixed - 1) / (multiBudget - multiReqFixed)

	for round := range 3 {
		log.take()
		for i, err := range s.RenewMany(ctx, rs) {
			if err != nil {
				t.Fatalf("round %d: RenewMany[%d]: %v", round, i, err)
			}
		}
		var multis []int
		for _, sz := range log.take() {
			if sz > 1024 { // not a ping
				multis = append(multis, sz)
			}
		}
		sum, largest := 0, 0
		for _, sz := range multis {
			sum += sz
			largest = max(largest, sz)
		}
		t.Logf("round %d: %d multis of %v bytes (%d renewals, %.0f request bytes each; floor %d at a budget of %d bytes)",
			round, len(multis), multis, n, float64(perOp)/n+float64(multiReqFixed)/n, floor, multiBudget)
		if want := len(multis)*multiReqFixed + perOp; sum != want {
			t.Errorf("round %d: the multis are %d bytes, the estimate says %d", round, sum, want)
		}
		if len(multis) > floor {
			t.Errorf("round %d: %d multis, want the floor %d", round, len(multis), floor)
		}
		if largest > juteMaxBuffer || largest < juteMaxBuffer*9/10 {
			t.Errorf("round %d: largest multi %d bytes, want within 90%%..100%% of jute.maxbuffer %d", round, largest, juteMaxBuffer)
		}
	}
	// The session survived: a lease still renews on its own.
	if err := s.Renew(ctx, rs[n-1]); err != nil {
		t.Fatalf("Renew after the large RenewMany: %v", err)
	}
}

// TestMultiFits: the split follows the byte budget, and a single oversized
// renewal still goes alone.
func TestMultiFits(t *testing.T) {
	size := func(p, d int) func(int) (int, int) { return func(int) (int, int) { return p, d } }
	per := multiReqPerOp + 100 + 150
	if got, want := multiFits(100000, size(100, 150)), (multiBudget-multiReqFixed)/per; got != want {
		t.Errorf("multiFits with 271-byte renewals = %d, want %d", got, want)
	}
	if got := multiFits(3, size(juteMaxBuffer, 0)); got != 1 {
		t.Errorf("multiFits with oversized renewals = %d, want 1", got)
	}
	if got := multiFits(100000, size(0, 0)); got != maxMultiOpCount {
		t.Errorf("multiFits with empty renewals = %d, want the response bound %d", got, maxMultiOpCount)
	}
	if got := multiFits(5, size(10, 10)); got != 5 {
		t.Errorf("multiFits(5 small) = %d, want 5", got)
	}
}
