// Store-level tests: the znode layout (key escaping, protected names, fence
// = czxid), Caps, RenewMany under ZooKeeper's packet limit, read epochs,
// a break's tombstone.

package zklease_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/zklease"
)

func TestLayout(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 30*time.Second)
	s := dial(t, srvs, zklease.WithRoot(root("layout")))
	fences := map[int64]string{}
	for _, key := range []string{"plain", "a/b/../c", ".", "..", "spaces and ünïcode", "%41"} {
		r := driver.Request{Key: key, Token: token(), Holder: "h", TTL: testTTL}
		g, err := s.Acquire(ctx, r)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", key, err)
		}
		fences[int64(g.Fence)] = r.Token
	}
	raw := connect(t, srvs)
	keys, _, err := raw.Children(s.Root())
	if err != nil || len(keys) != len(fences) {
		t.Fatalf("Children(%s) = %v, %v; want one node per key", s.Root(), keys, err)
	}
	for _, k := range keys {
		kids, _, err := raw.Children(s.Root() + "/" + k)
		if k == "." || k == ".." || strings.ContainsAny(k, "/ ") || err != nil || len(kids) != 1 {
			t.Fatalf("key node %q has children %v, %v; want a safe segment with one node", k, kids, err)
		}
		data, st, err := raw.Get(s.Root() + "/" + k + "/" + kids[0])
		tok, ok := fences[st.Czxid]
		if err != nil || !ok || !strings.HasPrefix(kids[0], "_c_"+tok+"-") || st.EphemeralOwner != s.Conn().SessionID() ||
			!strings.Contains(string(data), `"ttl_ms":1000`) {
			t.Errorf("node %s/%s: %s, %+v, %v; want _c_<token>-<seq>, ephemeral, czxid = fence, the TTL in its data", k, kids[0], data, st, err)
		}
	}
}

func TestCaps(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 30*time.Second)
	s := dial(t, srvs, zklease.WithRoot(root("limits")))
	if got := s.Caps().MaxTTL; got != testSession {
		t.Errorf("MaxTTL = %v, want the session timeout %v", got, testSession)
	}
	if _, err := lease.New(s, lease.WithTTL(testSession+time.Second)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("lease.New with a TTL above the session timeout: %v, want ErrInvalid", err)
	}
	// The test server has minSessionTimeout=1000: a shorter request is
	// raised, and MaxTTL is the negotiated value.
	short, err := zklease.Dial(ctx, srvs, 300*time.Millisecond, zklease.WithRoot(s.Root()))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer short.Close()
	if got := short.Caps().MaxTTL; got != time.Second {
		t.Errorf("MaxTTL with a 300ms session request = %v, want the negotiated 1s", got)
	}
	for _, opt := range []zklease.Option{zklease.WithRoot("relative"), zklease.WithRoot("/"), zklease.WithRoot("/a/../b"),
		zklease.WithRoot("/zookeeper/x"), zklease.WithACL(), nil} {
		if _, err := zklease.Dial(ctx, srvs, testSession, opt); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Dial with a bad option: %v, want ErrInvalid", err)
		}
	}
	if _, err := zklease.Dial(ctx, srvs, testSession, zklease.WithMaxWaiters(0)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Dial with WithMaxWaiters(0): %v, want ErrInvalid", err)
	}
	if _, err := zklease.New(connect(t, srvs)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New without WithSessionTimeout: %v, want ErrInvalid", err)
	}
	if c := s.Caps(); !c.FIFO || c.MaxWaiters != driver.DefaultMaxWaiters {
		t.Errorf("Caps = %+v, want FIFO with the default cap", c)
	}
}

// TestRenewManyLarge renews more leases than one multi may carry: ZooKeeper
// refuses requests over jute.maxbuffer (1 MiB) and drops the connection, so
// RenewMany must split them.
func TestRenewManyLarge(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 90*time.Second)
	s := dial(t, srvs, zklease.WithRoot(root("renewmany-large")))
	const n = 2500 // a single multi of these would exceed 1 MiB
	rs := make([]driver.Request, n)
	for i := range rs {
		rs[i] = driver.Request{Key: fmt.Sprintf("key-with-a-long-name-%05d-%s", i, strings.Repeat("x", 200)), Token: token(), Holder: "holder-" + strings.Repeat("h", 100), TTL: testSession}
		if _, err := s.Acquire(ctx, rs[i]); err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		if i%200 == 199 {
			// Acquiring them all can take longer than the TTL on a busy
			// machine: keep the first ones alive meanwhile.
			for j, err := range s.RenewMany(ctx, rs[:i+1]) {
				if err != nil {
					t.Fatalf("while acquiring: RenewMany[%d]: %v", j, err)
				}
			}
		}
	}
	for round := range 2 {
		for i, err := range s.RenewMany(ctx, rs) {
			if err != nil {
				t.Fatalf("round %d: RenewMany[%d]: %v", round, i, err)
			}
		}
	}
	// The session survived: a lease is still renewable on its own.
	if err := s.Renew(ctx, rs[n-1]); err != nil {
		t.Fatalf("Renew after the large RenewMany: %v", err)
	}
}

// TestReadEpochOutlivesItsFirstReader: readers queued behind a writer are
// let in together; one that joins before the reader ahead of it claims
// its turn records the epoch, which that reader then finds behind it once
// the epoch's first reader has left.
func TestReadEpochOutlivesItsFirstReader(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	s := dial(t, servers(t), zklease.WithRoot(root("epoch")))
	req := func(holder string, shared bool) driver.Request {
		return driver.Request{Key: "k", Token: token(), Holder: holder, TTL: testSession / 2, Queue: true, Shared: shared}
	}
	w, r0, r, x := req("w", false), req("r0", true), req("r", true), req("x", true)
	acquire := func(r driver.Request, granted bool) uint64 {
		t.Helper()
		g, err := s.Acquire(ctx, r)
		if granted != (err == nil) {
			t.Fatalf("Acquire for %s: %+v, %v; want granted %v", r.Holder, g, err, granted)
		}
		return g.Fence
	}
	acquire(w, true)
	for _, r := range []driver.Request{r0, r, x} {
		acquire(r, false)
	}
	if err := s.Release(ctx, w); err != nil {
		t.Fatalf("Release of the writer: %v", err)
	}
	epoch := acquire(x, true) // behind r0 and r, neither granted yet
	if f := acquire(r0, true); f != epoch {
		t.Fatalf("r0's fence %d, want x's %d", f, epoch)
	}
	if err := s.Release(ctx, r0); err != nil {
		t.Fatalf("Release of r0: %v", err)
	}
	if f := acquire(r, true); f != epoch { // now the lowest node
		t.Fatalf("r's fence %d, want the epoch's %d, which x holds", f, epoch)
	}
	if info, err := s.Inspect(ctx, "k"); err != nil || !info.Shared || info.Readers != 2 || info.Fence != epoch {
		t.Fatalf("Inspect = %+v, %v; want 2 readers with fence %d", info, err, epoch)
	}
}

// TestTombstone: Break leaves a persistent node "_b_<token>-<until>" that a
// Store which never knew the token finds (ErrBroken) and List shows; once the
// evicted hold would have expired, List hides it and deletes it.
func TestTombstone(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	srvs := servers(t)
	s := dial(t, srvs, zklease.WithRoot(root("tomb")))
	other := dial(t, srvs, zklease.WithRoot(s.Root()))
	r := driver.Request{Key: "k", Token: token(), Holder: "stuck", TTL: testTTL}
	if _, err := s.Acquire(ctx, r); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if en, err := other.Break(ctx, "k"); err != nil || len(en.Holders) != 1 {
		t.Fatalf("Break = %+v, %v; want the one holder", en, err)
	}
	raw := connect(t, srvs)
	kids, _, err := raw.Children(s.Root() + "/k")
	if err != nil || len(kids) != 1 || !strings.HasPrefix(kids[0], "_b_"+r.Token+"-") {
		t.Fatalf("children of the broken key = %v, %v; want one tombstone", kids, err)
	}
	if err := other.Renew(ctx, r); !errors.Is(err, lease.ErrBroken) {
		t.Errorf("Renew by a Store that never held the token = %v, want ErrBroken", err)
	}
	if page, _, err := other.List(ctx, "", "", 10); err != nil || len(page) != 1 || len(page[0].Broken) != 1 || page[0].Broken[0] != r.Token {
		t.Errorf("List = %+v, %v; want the key with its tombstone", page, err)
	}
	time.Sleep(testTTL + 100*time.Millisecond)
	if page, _, err := other.List(ctx, "", "", 10); err != nil || len(page) != 0 {
		t.Errorf("List after the tombstone expired = %+v, %v; want nothing", page, err)
	}
	if kids, _, err := raw.Children(s.Root() + "/k"); err == nil && len(kids) != 0 {
		t.Errorf("children after List = %v; want the expired tombstone deleted", kids)
	}
}
