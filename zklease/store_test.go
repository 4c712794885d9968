// Store-level tests: the znode layout (key escaping, protected names, fence
// = czxid), limits, New on a caller's connection, RenewMany's per-request
// results and the cleanup of a node whose create was cut off.

package zklease_test

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/zklease"
)

// connect returns a raw connection with a session, closed at cleanup.
func connect(t *testing.T, srvs []string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(srvs, testSession, zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn
			}
		case <-deadline:
			t.Fatal("no ZooKeeper session within 30s")
		}
	}
}

func TestLayout(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 30*time.Second)
	s := dial(t, srvs, zklease.WithRoot(root("layout")))
	raw := connect(t, srvs)
	for _, key := range []string{"plain", "a/b/../c", ".", "..", "spaces and ünïcode", "%41"} {
		r := lease.Request{Key: key, Token: token(), Holder: "h", TTL: testTTL}
		g, err := s.Acquire(ctx, r)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", key, err)
		}
		keys, _, err := raw.Children(s.Root())
		if err != nil {
			t.Fatalf("Children(%s): %v", s.Root(), err)
		}
		var parent string
		for _, k := range keys {
			kids, _, err := raw.Children(s.Root() + "/" + k)
			if err == nil && len(kids) == 1 && strings.HasPrefix(kids[0], "_c_"+r.Token+"-") {
				parent = s.Root() + "/" + k
			}
		}
		if parent == "" {
			t.Fatalf("key %q: no parent under %s holds a node named _c_<token>-<sequence> (children %v)", key, s.Root(), keys)
		}
		seg := path.Base(parent)
		if seg == "." || seg == ".." || strings.ContainsAny(seg, "/ ") {
			t.Errorf("key %q is stored as the segment %q", key, seg)
		}
		kids, _, _ := raw.Children(parent)
		data, st, err := raw.Get(parent + "/" + kids[0])
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if uint64(st.Czxid) != g.Fence {
			t.Errorf("key %q: fence %d, want the holder node's czxid %d", key, g.Fence, st.Czxid)
		}
		if st.EphemeralOwner != s.Conn().SessionID() {
			t.Errorf("key %q: the holder node is owned by session %#x, want the store's %#x", key, st.EphemeralOwner, s.Conn().SessionID())
		}
		if !strings.Contains(string(data), r.Token) || !strings.Contains(string(data), `"ttl_ms":1000`) {
			t.Errorf("key %q: holder node data %s lacks the token or the TTL", key, data)
		}
		if err := s.Release(ctx, r); err != nil {
			t.Errorf("Release(%q): %v", key, err)
		}
	}
}

func TestLimits(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 30*time.Second)
	s := dial(t, srvs, zklease.WithRoot(root("limits")))
	if got := s.Limits().MaxTTL; got != testSession {
		t.Errorf("MaxTTL = %v, want the session timeout %v", got, testSession)
	}
	r := lease.Request{Key: "k", Token: token(), Holder: "h", TTL: testSession + time.Millisecond}
	if _, err := s.Acquire(ctx, r); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Acquire with a TTL above the session timeout: %v, want ErrInvalid", err)
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
	if got := short.Limits().MaxTTL; got != time.Second {
		t.Errorf("MaxTTL with a 300ms session request = %v, want the negotiated 1s", got)
	}
	for _, opt := range []zklease.Option{zklease.WithRoot("relative"), zklease.WithRoot("/"), zklease.WithRoot("/a/../b"),
		zklease.WithRoot("/zookeeper/x"), zklease.WithACL(), nil} {
		if _, err := zklease.Dial(ctx, srvs, testSession, opt); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Dial with a bad option: %v, want ErrInvalid", err)
		}
	}
	bad := lease.Request{Key: "k", Token: "not/a token", TTL: testTTL}
	if _, err := s.Acquire(ctx, bad); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Acquire with a bad token: %v, want ErrInvalid", err)
	}
}

// TestNew: a Store on the caller's connection works, reports no Lost
// channel, and leaves the connection open when closed.
func TestNew(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 30*time.Second)
	conn := connect(t, srvs)
	if _, err := zklease.New(conn); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New without WithSessionTimeout: %v, want ErrInvalid", err)
	}
	s, err := zklease.New(conn, zklease.WithSessionTimeout(testSession), zklease.WithRoot(root("new")))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := lease.Request{Key: "k", Token: token(), Holder: "h", TTL: testTTL}
	g, err := s.Acquire(ctx, r)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if g.Lost != nil {
		t.Errorf("a Store made by New returned a Lost channel; it cannot see session events")
	}
	if err := s.Renew(ctx, r); err != nil {
		t.Errorf("Renew: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, _, err := conn.Exists("/"); err != nil {
		t.Errorf("the caller's connection does not work after the Store's Close: %v", err)
	}
}

// TestRenewMany: one multi renews many leases; a lease that is gone gets
// ErrNotHeld and the others are renewed all the same.
func TestRenewMany(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 30*time.Second)
	s := dial(t, srvs, zklease.WithRoot(root("renewmany")))
	other := dial(t, srvs, zklease.WithRoot(s.Root()))
	var rs []lease.Request
	for i := range 5 {
		r := lease.Request{Key: "k" + string(rune('a'+i)), Token: token(), Holder: "h", TTL: testTTL}
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		rs = append(rs, r)
	}
	if err := other.Release(ctx, rs[2]); err != nil { // behind s's back
		t.Fatalf("Release through another store: %v", err)
	}
	time.Sleep(testTTL * 2 / 3)
	errs := s.RenewMany(ctx, rs)
	for i, err := range errs {
		if i == 2 {
			if !errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("RenewMany of the released lease: %v, want ErrNotHeld", err)
			}
		} else if err != nil {
			t.Errorf("RenewMany[%d]: %v", i, err)
		}
	}
	// Renewed: past the first TTL the others are still held.
	time.Sleep(testTTL * 2 / 3)
	for i, r := range rs {
		info, err := other.Inspect(ctx, r.Key)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if info.Held != (i != 2) {
			t.Errorf("Inspect(%q) after RenewMany: %+v", r.Key, info)
		}
	}
}

// TestCutOffCreate: a holder node whose create reached the server but whose
// acquirer never learnt of it (a connection loss) is found by its token and
// deleted by Release, as the Client does after a failed acquire; meanwhile
// it holds the key only until its TTL runs out.
func TestCutOffCreate(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 30*time.Second)
	s := dial(t, srvs, zklease.WithRoot(root("ghost")))
	other := dial(t, srvs, zklease.WithRoot(s.Root()))
	r := lease.Request{Key: "ghost", Token: token(), Holder: "ghost", TTL: testTTL}
	// The create as it reached the server, done by another session.
	if _, err := other.Acquire(ctx, r); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := s.Acquire(ctx, lease.Request{Key: "ghost", Token: token(), Holder: "b", TTL: testTTL}); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire while the ghost holds: %v, want ErrHeld", err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatalf("Release by token through a store that never saw the node: %v", err)
	}
	if info, err := other.Inspect(ctx, "ghost"); err != nil || info.Held {
		t.Errorf("after the cleanup: Inspect = %+v, %v; want free", info, err)
	}
	if err := s.Release(ctx, r); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("second Release: %v, want ErrNotHeld", err)
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
	rs := make([]lease.Request, n)
	for i := range rs {
		rs[i] = lease.Request{Key: fmt.Sprintf("key-with-a-long-name-%05d-%s", i, strings.Repeat("x", 200)), Token: token(), Holder: "holder-" + strings.Repeat("h", 100), TTL: testSession}
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
