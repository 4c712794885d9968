// Security (docs/SECURITY.md item 3): the creator ACL that credentials give
// (a zk://user:pass@ URL). A client that is not authenticated as the lease
// identity can neither read, delete nor overwrite the lease nodes, nor
// acquire the keys; the identity's own stores work normally. A root open to
// anyone is refused.

package zklease_test

import (
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/zklease"
)

// walk returns every node under p (p included), parents first.
func walk(t *testing.T, c *zk.Conn, p string) []string {
	t.Helper()
	out := []string{p}
	kids, _, err := c.Children(p)
	if err != nil {
		t.Fatalf("Children(%s) as the owner: %v", p, err)
	}
	for _, k := range kids {
		out = append(out, walk(t, c, path.Join(p, k))...)
	}
	return out
}

// TestCredentialsGiveCreatorACL: a zk://user:pass@ URL, with no ACL given,
// creates every node with the creator ACL (the "auth" scheme: the digest
// identity of user:pass only), not world:anyone. A client without
// credentials cannot read the holder's token (data or node name), delete the
// node or create beside it; one with the wrong password can neither acquire
// nor release; a second store with the right credentials can.
func TestCredentialsGiveCreatorACL(t *testing.T) {
	srvs := servers(t)
	user, pw := "lk-"+randHex(4), "pw-"+randHex(8)
	rt := root("creator")
	openParent(t, dial(t, srvs).Conn(), path.Dir(rt))
	ctx := testCtx(t, 60*time.Second)

	// What a zk://user:pass@ URL makes (leaseurl's openZK).
	owner := dial(t, srvs, zklease.WithRoot(rt), zklease.WithAuth("digest", []byte(user+":"+pw)))
	// The same identity through zklease directly: a second store.
	second := dial(t, srvs, zklease.WithRoot(rt), zklease.WithAuth("digest", []byte(user+":"+pw)))
	t.Cleanup(func() { removeAll(second.Conn(), rt) })

	r := driver.Request{Key: "creator/key", Token: token(), Holder: "owner", TTL: 5 * time.Second}
	g, err := owner.Acquire(ctx, r)
	if err != nil {
		t.Fatalf("Acquire with credentials: %v", err)
	}
	nodes := walk(t, second.Conn(), rt)
	if len(nodes) != 3 {
		t.Fatalf("nodes under %s: %v; want the root, the key and the holder node", rt, nodes)
	}
	root, parent, holder := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		got, _, err := second.Conn().GetACL(n)
		if err != nil || len(got) != 1 || got[0].Scheme != "digest" || !strings.HasPrefix(got[0].ID, user+":") || got[0].Perms != zk.PermAll {
			t.Errorf("ACL of %s = %v, %v; want the creator's digest identity %s only", n, got, err, user)
		}
	}

	anon := dial(t, srvs, zklease.WithRoot(rt))
	c := anon.Conn()
	if data, _, err := c.Get(holder); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("anonymous Get(holder) = %q, %v; want ErrNoAuth (the data holds the token)", data, err)
	}
	if kids, _, err := c.Children(parent); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("anonymous Children(key node) = %v, %v; want ErrNoAuth (node names hold tokens)", kids, err)
	}
	if err := c.Delete(holder, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("anonymous Delete(holder) = %v, want ErrNoAuth", err)
	}
	if _, err := c.Set(holder, []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("anonymous Set(holder) = %v, want ErrNoAuth", err)
	}
	for _, p := range []string{parent + "/_c_" + token() + "-", root + "/other"} {
		if _, err := c.Create(p, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("anonymous Create(%s) = %v, want ErrNoAuth", p, err)
		}
	}

	wrong := dial(t, srvs, zklease.WithRoot(rt), zklease.WithAuth("digest", []byte(user+":pw-"+randHex(8))))
	for name, s := range map[string]*zklease.Store{"anonymous": anon, "wrong password": wrong} {
		if _, err := s.Acquire(ctx, driver.Request{Key: r.Key, Token: token(), Holder: name, TTL: time.Second}); err == nil {
			t.Errorf("%s: Acquire of the held key succeeded", name)
		}
		if _, err := s.Acquire(ctx, driver.Request{Key: "creator/free", Token: token(), Holder: name, TTL: time.Second}); err == nil {
			t.Errorf("%s: Acquire of a new key under the protected root succeeded", name)
		}
		if err := s.Release(ctx, r); err == nil {
			t.Errorf("%s: Release with the holder's token succeeded", name)
		}
	}
	info, err := second.Inspect(ctx, r.Key)
	if err != nil || !info.Held || info.Fence != g.Fence {
		t.Fatalf("after the attacks, Inspect = %+v, %v; want held with fence %d", info, err, g.Fence)
	}

	// The right credentials, another store: held against it, then it
	// releases the lease by its token and acquires the key itself.
	if _, err := second.Acquire(ctx, driver.Request{Key: r.Key, Token: token(), Holder: "second", TTL: time.Second}); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("second store: Acquire of the held key = %v, want ErrHeld", err)
	}
	if err := second.Release(ctx, r); err != nil {
		t.Fatalf("second store: Release: %v", err)
	}
	if g2, err := second.Acquire(ctx, driver.Request{Key: r.Key, Token: token(), Holder: "2", TTL: time.Second}); err != nil || g2.Fence <= g.Fence {
		t.Fatalf("second store: Acquire after the release = %+v, %v; want a grant with a fence above %d", g2, err, g.Fence)
	}
}

// TestCredentialsRefuseOpenRoot: a root that already exists open to anyone
// (made by an anonymous store, say) would let anyone create a key's node
// first and then list and delete the holder nodes under it, whatever their
// own ACL. Credentials without WithACL refuse it (ErrOpenRoot); a root
// others may only read is accepted, and so is an explicit WithACL.
func TestCredentialsRefuseOpenRoot(t *testing.T) {
	srvs := servers(t)
	user, pw := "lk-"+randHex(4), "pw-"+randHex(8)
	auth := zklease.WithAuth("digest", []byte(user+":"+pw))
	raw := connect(t, srvs)
	openParent(t, raw, "/leasekit-test")
	if err := raw.AddAuth("digest", []byte(user+":"+pw)); err != nil {
		t.Fatalf("AddAuth: %v", err)
	}
	mkRoot := func(name string, acl []zk.ACL) string {
		t.Helper()
		rt := root(name)
		if _, err := raw.Create(rt, nil, zk.FlagPersistent, acl); err != nil {
			t.Fatalf("Create(%s): %v", rt, err)
		}
		t.Cleanup(func() { removeAll(raw, rt) })
		return rt
	}

	open := mkRoot("open", zk.WorldACL(zk.PermAll))
	s, err := zklease.Dial(testCtx(t, 30*time.Second), srvs, testSession, zklease.WithRoot(open), auth)
	if !errors.Is(err, zklease.ErrOpenRoot) || !errors.Is(err, lease.ErrInvalid) {
		if s != nil {
			_ = s.Close()
		}
		t.Errorf("Dial with credentials on a world-writable root = %v, want ErrOpenRoot and ErrInvalid", err)
	}
	// Accepted: an explicit ACL (whoever opened the root on purpose), and a
	// root others may only read.
	readable := mkRoot("readable", append(zk.WorldACL(zk.PermRead), zk.AuthACL(zk.PermAll)...))
	for _, s := range []*zklease.Store{dial(t, srvs, zklease.WithRoot(open), auth, zklease.WithACL(zk.AuthACL(zk.PermAll)...)),
		dial(t, srvs, zklease.WithRoot(readable), auth)} {
		r := driver.Request{Key: "k", Token: token(), Holder: "h", TTL: time.Second}
		if _, err := s.Acquire(testCtx(t, 30*time.Second), r); err != nil {
			t.Errorf("Acquire under %s: %v", s.Root(), err)
		}
	}
}
