package k8slease_test

import (
	"errors"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
)

// TestK8sCorruptLeases: a key's Lease object, or a waiter's, whose
// annotations or holder no store writes (changed with client-go) is
// ErrCorrupt, never a grant. A non-numeric fence used to read as 0, so the
// next grant got fence 1; a TTL that did not parse read as expired.
func TestK8sCorruptLeases(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cs := client(t)
	s := newStore(t, cs, freshPrefix(t))
	leases := cs.CoordinationV1().Leases(namespace)
	// corrupt holds key (queued behind another holder, if waiter) and
	// changes the object of that hold; it returns the token.
	corrupt := func(key string, waiter bool, change func(l *coordv1.Lease)) string {
		t.Helper()
		r := req(key, "h", 30*time.Second)
		if waiter {
			if _, err := s.Acquire(ctx, req(key, "holder", 30*time.Second)); err != nil {
				t.Fatal(err)
			}
			r.Queue = true
			leasetest.Queued(t, ctx, s, r, 0)
		} else if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
		ls, err := leases.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls.Items {
			if l.Annotations["leasekit.io/key"] == key && l.Annotations["leasekit.io/token"] == r.Token && (l.Name == s.Prefix()+key) != waiter {
				change(&l)
				if _, err := leases.Update(ctx, &l, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				return r.Token
			}
		}
		t.Fatalf("no Lease object of %q for %s", key, r.Token)
		return ""
	}
	set := func(ann, v string) func(*coordv1.Lease) { return func(l *coordv1.Lease) { l.Annotations[ann] = v } }
	for _, tc := range []struct {
		what   string
		change func(*coordv1.Lease)
	}{
		{"a fence that is no number", set("leasekit.io/fence", "many")},
		{"no fence", func(l *coordv1.Lease) { delete(l.Annotations, "leasekit.io/fence") }},
		{"a fence of 25 digits", set("leasekit.io/fence", "1234567890123456789012345")},
		{"a fence with a sign", set("leasekit.io/fence", "+7")},
		{"the last fence", set("leasekit.io/fence", "9223372036854775807")},
		{"a TTL that is no number", set("leasekit.io/ttl-ms", "30s")},
		{"no TTL", func(l *coordv1.Lease) { delete(l.Annotations, "leasekit.io/ttl-ms") }},
		{"a negative TTL", set("leasekit.io/ttl-ms", "-30000")},
		{"a TTL past a time.Duration", set("leasekit.io/ttl-ms", "9223372036854775")},
		{"no holderIdentity", func(l *coordv1.Lease) { l.Spec.HolderIdentity = nil }},
	} {
		key := "corrupt-" + randHex(4)
		leasetest.WantCorrupt(t, s, key, corrupt(key, false, tc.change), tc.what)
	}
	for _, tc := range []struct {
		what   string
		change func(*coordv1.Lease)
	}{
		{"a waiter's TTL that is no number", set("leasekit.io/ttl-ms", "soon")},
		{"a waiter's ticket that is no number", set("leasekit.io/ticket", "0x1")},
		{"a waiter's fence that is no number", set("leasekit.io/fence", "")},
	} {
		key := "waiter-" + randHex(4)
		tok := corrupt(key, true, tc.change)
		for _, r := range []struct {
			token string
			queue bool
		}{{tok, true}, {randHex(16), false}, {randHex(16), true}} {
			rq := req(key, "w", 30*time.Second)
			rq.Token, rq.Queue = r.token, r.queue
			if g, err := s.Acquire(ctx, rq); !errors.Is(err, lease.ErrCorrupt) {
				t.Errorf("%s: Acquire by %s (queue %v) = %+v, %v; want ErrCorrupt", tc.what, r.token, r.queue, g, err)
			}
		}
	}
}
