// Renewals vouched for by the store's watch: one keep-alive per round once
// the keys were checked, and a key deleted or taken behind the store's back
// is still reported lost at the next renewal.

package etcdlease_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// roundGap separates renewal rounds in these tests, as the Client's renew
// interval does: the watch answers a progress request within it (normally
// in a millisecond; generous for a loaded machine).
const roundGap = 300 * time.Millisecond

// TestRenewRoundTrips: after the first round (a full check of every key
// and the start of the watch), renewing 1000 keys is one LeaseKeepAlive per
// round and nothing else: no read, no new stream.
func TestRenewRoundTrips(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	cli, cnt := countingCli(t)
	s := newStore(t, cli, testPrefix())
	const n = 1000
	rs := make([]lease.Request, n)
	for i := range rs {
		rs[i] = req(fmt.Sprintf("k%04d", i), 2*time.Second)
		if _, err := s.Acquire(ctx, rs[i]); err != nil {
			t.Fatal(err)
		}
	}
	renew := func(what string) map[string]int {
		t.Helper()
		cnt.take()
		for i, err := range s.RenewMany(ctx, rs) {
			if err != nil {
				t.Fatalf("%s: RenewMany[%d]: %v", what, i, err)
			}
		}
		return cnt.take()
	}
	first := renew("first round")
	t.Logf("first round: %v", first)
	if first["LeaseKeepAlive"] != 1 || first["Txn"] != (n+63)/64 {
		t.Errorf("first round: %v, want 1 LeaseKeepAlive and %d Txn (full check)", first, (n+63)/64)
	}
	const rounds = 8
	full := 0
	for round := range rounds {
		time.Sleep(roundGap)
		got := renew(fmt.Sprintf("round %d", round+2))
		if len(got) == 1 && got["LeaseKeepAlive"] == 1 {
			continue
		}
		// A round that found the watch not current reads the keys again:
		// correct, but it must be rare.
		full++
		t.Logf("round %d: %v", round+2, got)
	}
	if full > 1 {
		t.Errorf("%d of %d rounds did more than one LeaseKeepAlive, want at most 1", full, rounds)
	}
}

// TestRenewDeletedBehindTheStore: keys deleted by an operator, or deleted
// and re-created by another holder, while the store's etcd lease stays
// alive, are reported lost at the next renewal; the others renew.
func TestRenewDeletedBehindTheStore(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cli := newCli(t, endpoints(t))
	admin := newCli(t, endpoints(t))
	prefix := testPrefix()
	s := newStore(t, cli, prefix)
	other := newStore(t, admin, prefix)
	const ttl = 2 * time.Second
	rs := []lease.Request{req("deleted", ttl), req("taken", ttl), req("kept", ttl), req("moved", ttl)}
	for _, r := range rs {
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	renew := func(what string, want ...bool) {
		t.Helper()
		for i, err := range s.RenewMany(ctx, rs) {
			switch {
			case want[i] && err != nil:
				t.Errorf("%s: renewal of %q: %v, want nil", what, rs[i].Key, err)
			case !want[i] && !errors.Is(err, lease.ErrNotHeld):
				t.Errorf("%s: renewal of %q: %v, want ErrNotHeld", what, rs[i].Key, err)
			}
		}
	}
	renew("first round (full check)", true, true, true, true)
	time.Sleep(roundGap)
	renew("second round (vouched)", true, true, true, true)

	// Behind the store's back: an operator deletes one key; another
	// deletes one and a new holder takes it; the same token re-acquires one
	// through another store (it moves to that store's etcd lease).
	if _, err := admin.Delete(ctx, prefix+"deleted"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(ctx, prefix+"taken"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, req("taken", ttl)); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, rs[3]); err != nil {
		t.Fatal(err)
	}
	movedTo, _ := leaseOf(t, ctx, admin, prefix, "moved")
	// A change is seen at the first renewal after the watch delivered it,
	// and at the latest at the second (the first may run before the event
	// arrives; its keep-alive then shows the revision moved and the store
	// asks the watch for its progress, which the second requires): the
	// kept key renews throughout, the others are settled after two rounds.
	for round := range 2 {
		time.Sleep(roundGap)
		errs := s.RenewMany(ctx, rs)
		if errs[2] != nil {
			t.Errorf("round %d after the deletes: renewal of %q: %v, want nil", round+1, rs[2].Key, errs[2])
		}
		for i := range 2 {
			if errs[i] != nil && !errors.Is(errs[i], lease.ErrNotHeld) {
				t.Errorf("round %d after the deletes: renewal of %q: %v, want nil or ErrNotHeld", round+1, rs[i].Key, errs[i])
			}
		}
	}
	// The moved key is back on the store's etcd lease (so that it does not
	// expire with the other store's), and the store vouches for the rest.
	if id, _ := leaseOf(t, ctx, admin, prefix, "moved"); id == movedTo {
		t.Errorf("the re-acquired key is still on the other store's etcd lease %x after two rounds", id)
	}
	time.Sleep(roundGap)
	renew("next round", false, false, true, true)

	// A Release through the store is known at once.
	if err := s.Release(ctx, rs[2]); err != nil {
		t.Fatal(err)
	}
	renew("after the release", false, false, false, true)
}
