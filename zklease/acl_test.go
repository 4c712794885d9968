// Security: a digest ACL on our nodes (WithACL + WithAuth). A client that is
// not authenticated as the lease identity can neither read, delete nor
// overwrite the lease nodes, nor acquire the keys; the identity's own
// stores work normally.

package zklease_test

import (
	"errors"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
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

func TestDigestACLProtectsOurNodes(t *testing.T) {
	srvs := servers(t)
	pw := "pw-" + randHex(8)
	rt := root("acl")
	// The store would create missing ancestors of its root with our digest
	// ACL too; the shared parent of every test's root must stay open.
	plain := dial(t, srvs)
	if _, err := plain.Conn().Create(path.Dir(rt), nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("create %s: %v", path.Dir(rt), err)
	}
	acl := zk.DigestACL(zk.PermAll, "leasekit", pw)
	owner := dial(t, srvs, zklease.WithRoot(rt), zklease.WithACL(acl...), zklease.WithAuth("digest", []byte("leasekit:"+pw)))
	ctx := testCtx(t, 60*time.Second)
	t.Cleanup(func() {
		nodes := walk(t, owner.Conn(), rt)
		for i := len(nodes) - 1; i >= 0; i-- {
			_ = owner.Conn().Delete(nodes[i], -1)
		}
	})

	r := lease.Request{Key: "protected/key", Token: token(), Holder: "owner", TTL: 5 * time.Second}
	g, err := owner.Acquire(ctx, r)
	if err != nil {
		t.Fatalf("Acquire with the digest identity: %v", err)
	}
	nodes := walk(t, owner.Conn(), rt)
	if len(nodes) < 3 {
		t.Fatalf("nodes under %s: %v; want the root, the key and the holder node", rt, nodes)
	}
	for _, n := range nodes {
		got, _, err := owner.Conn().GetACL(n)
		if err != nil || len(got) != 1 || got[0].Scheme != "digest" {
			t.Fatalf("ACL of %s = %v, %v; want our digest ACL only", n, got, err)
		}
	}

	// Unauthenticated, and authenticated as someone else.
	wrongPW := "pw-" + randHex(8)
	for name, opts := range map[string][]zklease.Option{
		"anonymous":      {zklease.WithRoot(rt)},
		"wrong password": {zklease.WithRoot(rt), zklease.WithAuth("digest", []byte("leasekit:"+wrongPW))},
	} {
		other := dial(t, srvs, opts...)
		c := other.Conn()
		for _, n := range nodes {
			if _, _, err := c.Get(n); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("%s: Get(%s) = %v, want ErrNoAuth", name, n, err)
			}
			if err := c.Delete(n, -1); !errors.Is(err, zk.ErrNoAuth) && !errors.Is(err, zk.ErrNotEmpty) {
				t.Errorf("%s: Delete(%s) = %v, want ErrNoAuth", name, n, err)
			}
			if _, err := c.Set(n, []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("%s: Set(%s) = %v, want ErrNoAuth", name, n, err)
			}
		}
		if _, err := other.Acquire(ctx, lease.Request{Key: r.Key, Token: token(), Holder: name, TTL: time.Second}); err == nil {
			t.Errorf("%s: Acquire of the protected key succeeded", name)
		}
		if err := other.Release(ctx, r); err == nil {
			t.Errorf("%s: Release with the holder's token succeeded without the identity", name)
		}
	}
	info, err := owner.Inspect(ctx, r.Key)
	if err != nil || !info.Held || info.Fence != g.Fence {
		t.Fatalf("after the attempts, Inspect = %+v, %v; want still held with fence %d", info, err, g.Fence)
	}
	if err := owner.Release(ctx, r); err != nil {
		t.Fatalf("Release by the owner: %v", err)
	}
}
