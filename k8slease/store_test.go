// What the suite cannot see: the Lease objects, names, expiry as observed,
// foreign objects and bad credentials.

package k8slease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/k8slease"
)

// req returns a request for key with a new token.
func req(key, holder string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Token: randHex(16), Holder: holder, TTL: ttl}
}

// TestK8sLeaseObject: a hold is a Lease as client-go's leader election writes
// it (holder identity, whole seconds, renew time, transitions), plus the
// key, fence, token and exact TTL in annotations; Release keeps the object
// and its fence.
func TestK8sLeaseObject(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cs := client(t)
	s := newStore(t, cs, freshPrefix(t))
	r := req("orders", "web-1", 2100*time.Millisecond)
	g, err := s.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, s.Prefix()+"orders", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Lease object: %v", err)
	}
	sp := l.Spec
	if sp.HolderIdentity == nil || *sp.HolderIdentity != "web-1" || sp.LeaseDurationSeconds == nil || *sp.LeaseDurationSeconds != 3 ||
		sp.RenewTime == nil || sp.AcquireTime == nil || sp.LeaseTransitions == nil || uint64(*sp.LeaseTransitions) != g.Fence {
		t.Errorf("spec %+v, want holder web-1, 3 s, times set and %d transitions", sp, g.Fence)
	}
	if a := l.Annotations; a["leasekit.io/key"] != "orders" || a["leasekit.io/token"] != r.Token || a["leasekit.io/ttl-ms"] != "2100" {
		t.Errorf("annotations %v", a)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	l, err = cs.CoordinationV1().Leases(namespace).Get(ctx, s.Prefix()+"orders", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity != nil || l.Annotations["leasekit.io/token"] != "" {
		t.Fatalf("after Release: %+v, %v; want the object, free", l, err)
	}
	if info, err := s.Inspect(ctx, "orders"); err != nil || info.Held || info.Fence != g.Fence {
		t.Errorf("Inspect after Release = %+v, %v; want free with fence %d", info, err, g.Fence)
	}
}

// TestK8sNames: keys that are not object names map to valid, distinct names;
// a bad prefix is refused.
func TestK8sNames(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cs := client(t)
	s := newStore(t, cs, freshPrefix(t))
	keys := []string{"Orders", "orders", "a/b c", "..", "", "ü", strings.Repeat("x", 1000), "-x-"}
	var fences []uint64
	for _, k := range keys {
		g, err := s.Acquire(ctx, req(k, "h", 5*time.Second))
		if err != nil {
			t.Fatalf("Acquire %q: %v", k, err)
		}
		fences = append(fences, g.Fence)
	}
	for i, k := range keys {
		if info, err := s.Inspect(ctx, k); err != nil || !info.Held || info.Fence != fences[i] {
			t.Errorf("Inspect %q = %+v, %v", k, info, err)
		}
	}
	for _, p := range []string{"UPPER", "a/b", strings.Repeat("a", 101), "-x"} {
		if _, err := k8slease.New(cs.CoordinationV1(), namespace, k8slease.WithPrefix(p)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("New with prefix %q: %v, want ErrInvalid", p, err)
		}
	}
	if _, err := k8slease.New(cs.CoordinationV1(), ""); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New without a namespace: %v, want ErrInvalid", err)
	}
}

// TestK8sForeignLease: a Lease the store did not write (client-go's leader
// election's, or another key's under the same name) is never taken over.
func TestK8sForeignLease(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cs := client(t)
	s := newStore(t, cs, freshPrefix(t))
	who := "controller-0"
	foreign := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: s.Prefix() + "elected"},
		Spec: coordv1.LeaseSpec{HolderIdentity: &who}}
	if _, err := cs.CoordinationV1().Leases(namespace).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, req("elected", "me", 5*time.Second)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Acquire of a foreign Lease: %v, want ErrInvalid", err)
	}
	if _, err := s.Inspect(ctx, "elected"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Inspect of a foreign Lease: %v, want ErrInvalid", err)
	}
}

// TestK8sObservedExpiry: without the wall-clock rule, a store judges a hold
// expired only once it has seen the Lease unchanged for the TTL by its own
// clock, whatever renewTime says: a store that first looks after the TTL
// has run out still waits a TTL. With it (the default), renewTime + TTL +
// the skew decides for such a store.
func TestK8sObservedExpiry(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cs := client(t)
	prefix := freshPrefix(t)
	a, late := newStore(t, cs, prefix), newStore(t, cs, prefix, k8slease.WithMaxClockSkew(-1))
	wall := newStore(t, cs, prefix, k8slease.WithMaxClockSkew(100*time.Millisecond))
	ttl := 1500 * time.Millisecond
	ga, err := a.Acquire(ctx, req("k", "a", ttl))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + 200*time.Millisecond)
	rb := req("k", "b", ttl)
	var he *lease.HeldError
	if _, err := late.Acquire(ctx, rb); !errors.As(err, &he) || he.Remaining < ttl/2 {
		t.Fatalf("the late store's first Acquire = %v, want held for about a TTL more", err)
	}
	for _, s := range []*k8slease.Store{a, wall} {
		if info, err := s.Inspect(ctx, "k"); err != nil || info.Held {
			t.Errorf("the holder's store, or one trusting renewTime: Inspect = %+v, %v; want free", info, err)
		}
	}
	time.Sleep(ttl + 200*time.Millisecond)
	if g, err := late.Acquire(ctx, rb); err != nil || g.Fence <= ga.Fence {
		t.Errorf("after a TTL unchanged: %+v, %v; want a grant above %d", g, err, ga.Fence)
	}
}

// TestK8sBadToken: an apiserver that refuses the credentials gives errors
// that say so, not ErrHeld or ErrNotHeld (the Client retries them).
func TestK8sBadToken(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cfg := restConfig(t)
	cfg.BearerToken, cfg.BearerTokenFile = "wrong", ""
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, cs, freshPrefix(t))
	_, err = s.Acquire(ctx, req("k", "a", 5*time.Second))
	if !apierrors.IsUnauthorized(err) || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Acquire with a wrong token: %v, want Unauthorized", err)
	}
}
