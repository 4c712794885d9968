package zklease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/zklease"
)

// escape is the znode name of the tests' keys ('/' is their only byte
// that zklease escapes).
func escape(key string) string { return strings.ReplaceAll(key, "/", "%2F") }

// TestAcquireManyMixed: one AcquireMany of keys with no parent yet (the
// multi fails on each in turn until their parents exist), a free key whose
// parent exists and a key another Store holds. The free ones are granted,
// each node its key's only child with its czxid as fence; the held one is
// refused, naming its holder, and leaves no node behind. One multi created
// them all: the grants share its zxid.
func TestAcquireManyMixed(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 30*time.Second)
	s := dial(t, srvs, zklease.WithRoot(root("acquiremany")))
	o := dial(t, srvs, zklease.WithRoot(s.Root()))
	req := func(key, holder string) driver.Request {
		return driver.Request{Key: key, Token: token(), Holder: holder, TTL: testTTL}
	}
	if _, err := o.Acquire(ctx, req("held", "other")); err != nil {
		t.Fatal(err)
	}
	used := req("used", "me")
	if _, err := s.Acquire(ctx, used); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, used); err != nil {
		t.Fatal(err)
	}

	rs := []driver.Request{req("new-1", "me"), req("used", "me"), req("held", "me"), req("new-2", "me"), req("new/3", "me")}
	gs, errs := s.AcquireMany(ctx, rs)
	raw := connect(t, srvs)
	for i, r := range rs {
		kids, _, err := raw.Children(s.Root() + "/" + escape(r.Key))
		if err != nil || len(kids) != 1 {
			t.Errorf("%q: children %v, %v; want one node", r.Key, kids, err)
			continue
		}
		_, st, err := raw.Get(s.Root() + "/" + escape(r.Key) + "/" + kids[0])
		mine := err == nil && strings.HasPrefix(kids[0], "_c_"+r.Token+"-")
		if r.Key == "held" {
			var he *lease.HeldError
			if !errors.As(errs[i], &he) || he.Holder != "other" || mine {
				t.Errorf("AcquireMany of a held key: %v, node %s; want a *HeldError naming %q and no node of ours", errs[i], kids[0], "other")
			}
			continue
		}
		if errs[i] != nil || !mine || gs[i].Fence != uint64(st.Czxid) || gs[i].Lost == nil {
			t.Errorf("AcquireMany[%q] = %+v, %v, node %s (czxid %d); want our node, its czxid as fence, a Lost channel", r.Key, gs[i], errs[i], kids[0], st.Czxid)
		}
		if err := s.Renew(ctx, r); err != nil {
			t.Errorf("Renew(%q) after AcquireMany: %v", r.Key, err)
		}
		if gs[i].Fence != gs[0].Fence {
			t.Errorf("fence of %q %d, of %q %d; want one multi's zxid for all", r.Key, gs[i].Fence, rs[0].Key, gs[0].Fence)
		}
	}
}

// TestReleaseManyNodeGone: a ReleaseMany whose multi fails, since one node
// was deleted behind the Store's back, releases the others one by one and
// reports the gone one as not held.
func TestReleaseManyNodeGone(t *testing.T) {
	srvs := servers(t)
	ctx := testCtx(t, 30*time.Second)
	s := dial(t, srvs, zklease.WithRoot(root("releasemany")))
	var rs []driver.Request
	for _, k := range []string{"a", "b", "c"} {
		rs = append(rs, driver.Request{Key: k, Token: token(), Holder: "me", TTL: testTTL})
	}
	for i, err := range s.ReleaseMany(ctx, rs) { // nothing held yet
		if !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("ReleaseMany[%d] of a token never granted: %v, want ErrNotHeld", i, err)
		}
	}
	_, errs := s.AcquireMany(ctx, rs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	raw := connect(t, srvs)
	kids, _, err := raw.Children(s.Root() + "/b")
	if err != nil || len(kids) != 1 {
		t.Fatalf("children of b: %v, %v", kids, err)
	}
	if err := raw.Delete(s.Root()+"/b/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	errs = s.ReleaseMany(ctx, rs)
	for i, r := range rs {
		if want := r.Key == "b"; errors.Is(errs[i], lease.ErrNotHeld) != want || !want && errs[i] != nil {
			t.Errorf("ReleaseMany[%q] = %v, want ErrNotHeld only for the deleted node", r.Key, errs[i])
		}
		if kids, _, err := raw.Children(s.Root() + "/" + r.Key); err == nil && len(kids) != 0 {
			t.Errorf("after ReleaseMany, %q still has nodes %v", r.Key, kids)
		}
	}
}
