// Tokens never reach errors (which the Client logs) in full: the errors of
// operations provoked on a real server (no read or delete permission, a
// closed connection), and the Client's log during a connection outage.

package zklease_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/zklease"
)

// shownErr is an error an operation returned, and the token whose node path
// it must show in short form ("" when it names no node).
type shownErr struct {
	what  string
	err   error
	names string
}

func TestErrorsHideTokens(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 60*time.Second)
	rt := root("redact")

	// The owner connection makes the parents with the ACLs each case needs
	// and removes everything at the end (it may delete anywhere).
	pw := "pw-" + randHex(8)
	owner := connect(t, srvs)
	if err := owner.AddAuth("digest", []byte("owner:"+pw)); err != nil {
		t.Fatalf("AddAuth: %v", err)
	}
	ownerACL := zk.DigestACL(zk.PermAll, "owner", pw)
	for _, p := range []string{path.Dir(rt), rt} {
		if _, err := owner.Create(p, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("Create(%s): %v", p, err)
		}
	}
	t.Cleanup(func() { removeAll(owner, rt) })
	mkParent := func(key string, worldPerms int32) {
		t.Helper()
		acl := append(zk.WorldACL(worldPerms), ownerACL...)
		if _, err := owner.Create(rt+"/"+key, nil, zk.FlagPersistent, acl); err != nil {
			t.Fatalf("Create(%s/%s): %v", rt, key, err)
		}
	}
	var tokens []string
	tok := func() string { v := token(); tokens = append(tokens, v); return v }
	req := func(key, token string, ttl time.Duration) driver.Request {
		return driver.Request{Key: key, Token: token, Holder: "redact-test", TTL: ttl}
	}
	mustAcquire := func(s *zklease.Store, r driver.Request) {
		t.Helper()
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatalf("Acquire(%s, %s…): %v", r.Key, r.Token[:8], err)
		}
	}
	var shown []shownErr
	show := func(what string, err error, names string) { shown = append(shown, shownErr{what, err, names}) }

	plain := dial(t, srvs, zklease.WithRoot(rt))
	pw2 := "pw-" + randHex(8)
	locked := dial(t, srvs, zklease.WithRoot(rt),
		zklease.WithACL(zk.DigestACL(zk.PermAll, "locked", pw2)...), zklease.WithAuth("digest", []byte("locked:"+pw2)))
	holder := dial(t, srvs, zklease.WithRoot(rt))
	live := 5 * time.Second // well inside the test; below the session timeout

	// Another holder's node that we may not read: Acquire, Renew and an
	// Acquire of the same token through another store read it and fail.
	mkParent("noread", zk.PermAll)
	a := tok()
	mustAcquire(locked, req("noread", a, live))
	_, err := plain.Acquire(ctx, req("noread", tok(), testTTL))
	show("Acquire of a key whose holder node is unreadable", err, a)
	show("Renew of a token whose node is unreadable", plain.Renew(ctx, req("noread", a, testTTL)), a)
	_, err = plain.Acquire(ctx, req("noread", a, testTTL))
	show("Acquire of a token held through another store, unreadable", err, a)

	// A parent without delete permission: dropping our node after finding
	// the key held, and taking away an expired holder's node, fail.
	mkParent("nodelete", zk.PermAll&^zk.PermDelete)
	mustAcquire(holder, req("nodelete", tok(), live))
	d := tok()
	_, err = plain.Acquire(ctx, req("nodelete", d, testTTL))
	show("Acquire that cannot delete its own node", err, d)
	show("Release that cannot delete", plain.Release(ctx, req("nodelete", d, testTTL)), "")
	// A closed connection (the store does not own it, so it is not closed).
	conn := connect(t, srvs)
	cs, err := zklease.New(conn, zklease.WithRoot(rt), zklease.WithSessionTimeout(testSession))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c1, c2 := tok(), tok()
	mustAcquire(cs, req("closed1", c1, live))
	mustAcquire(cs, req("closed2", c2, live))
	conn.Close()
	show("Renew on a closed connection", cs.Renew(ctx, req("closed1", c1, live)), c1)
	_, err = cs.Acquire(ctx, req("closed1", c1, live))
	show("Acquire again on a closed connection", err, c1)
	for i, err := range cs.RenewMany(ctx, []driver.Request{req("closed1", c1, live), req("closed2", c2, live)}) {
		show(fmt.Sprintf("RenewMany on a closed connection, lease %d", i+1), err, "")
	}
	show("Release on a closed connection", cs.Release(ctx, req("closed2", c2, live)), "")

	for _, s := range shown {
		if s.err == nil {
			t.Errorf("%s: no error", s.what)
			continue
		}
		msg := s.err.Error()
		for _, tk := range tokens {
			if strings.Contains(msg, tk) {
				t.Errorf("%s: the error shows token %s… in full: %s", s.what, tk[:8], "(message withheld)")
			}
		}
		if s.names != "" && !strings.Contains(msg, "_c_"+s.names[:8]+"…-") {
			t.Errorf("%s: the error does not name the node of %s… in short form: %s", s.what, s.names[:8], "(message withheld)")
		}
	}
}

// TestOutageLogHidesTokens: while the connection is down the Client logs
// each failed renewal with the store's error, which names the holder node;
// the log shows the token only shortened.
func TestOutageLogHidesTokens(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 60*time.Second)
	conn := connect(t, srvs)
	s, err := zklease.New(conn, zklease.WithRoot(root("outage")), zklease.WithSessionTimeout(testSession))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var buf syncBuffer
	c, err := lease.New(s, lease.WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		lease.WithTTL(600*time.Millisecond))
	if err != nil {
		t.Fatalf("lease.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l, err := c.TryAcquire(ctx, "outage")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	tk := l.Token()
	conn.Close() // the outage: every renewal fails until the local deadline
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the lease was not lost within 20s of closing the connection")
	}
	if !errors.Is(l.Err(), lease.ErrLost) {
		t.Errorf("Err after the outage = %v, want ErrLost", l.Err())
	}
	out := buf.String()
	if strings.Contains(out, tk) {
		t.Errorf("the log shows the token %s… in full:\n%s", tk[:8], "(log withheld)")
	}
	if !strings.Contains(out, "_c_"+tk[:8]+"…-") {
		t.Errorf("the log does not name the holder node in short form (_c_%s…-):\n%s", tk[:8], "(log withheld)")
	}
}

// syncBuffer is a bytes.Buffer safe for the Client's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
