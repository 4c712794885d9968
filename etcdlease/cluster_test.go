// The store on a private three-node etcd cluster: the conformance suite,
// a leader killed while a lease is held, a holder cut off from the cluster,
// and a cluster that loses its quorum.

package etcdlease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
)

// failoverTTL is the TTL of the fail-over tests: long enough for an election
// (1-2s with etcd's default 1s election timeout) on a noisy machine.
const failoverTTL = 5 * time.Second

// after matches the events of kind for key at or after t.
func after(key string, kind lease.EventKind, t time.Time) func(lease.Event) bool {
	return func(ev lease.Event) bool { return ev.Key == key && ev.Kind == kind && !ev.Time.Before(t) }
}

// newLeaseClient returns a lease.Client over a new store on eps, closed at
// cleanup.
func newLeaseClient(t *testing.T, eps []string, prefix string, opts ...lease.Option) *lease.Client {
	t.Helper()
	s := newStore(t, newCli(t, eps), prefix)
	c, err := lease.New(s, append([]lease.Option{lease.WithTTL(failoverTTL)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestConformanceEtcdCluster(t *testing.T) {
	c := startCluster(t, 3)
	runSuite(t, newCli(t, c.endpoints()))
}

// TestClusterLeaderKill: the leader is killed while a lease is held; the
// renewals resume on the new leader within the TTL and the lease survives.
func TestClusterLeaderKill(t *testing.T) {
	t.Parallel() // private servers; after the conformance suite, whose leak check sees the whole process
	c := startCluster(t, 3)
	ctx := testCtx(t, 2*time.Minute)
	prefix := testPrefix()
	rec := &leasetest.Recorder{}
	holder := newLeaseClient(t, c.endpoints(), prefix, lease.WithObserver(rec))
	key := "leader-kill"
	l, err := holder.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := rec.Find(0, 2*failoverTTL, after(key, lease.EventRenewed, time.Time{})); !ok {
		t.Fatal("no renewal before the kill")
	}

	admin := newCli(t, c.endpoints())
	old := c.leader(ctx, admin)
	killed := time.Now()
	c.kill(old)
	t.Logf("killed the leader %s", old.name)

	ev, _, ok := rec.Find(0, failoverTTL, after(key, lease.EventRenewed, killed))
	if !ok {
		t.Fatalf("no successful renewal within the TTL %v of the leader's death (Err() = %v)", failoverTTL, l.Err())
	}
	t.Logf("first renewal after the kill: %v after it", ev.Time.Sub(killed).Round(time.Millisecond))
	// Hold through two more TTLs on the new leader.
	time.Sleep(2 * failoverTTL)
	if err := l.Err(); err != nil {
		t.Fatalf("after the leader's death: Err() = %v, want nil", err)
	}
	if first, _, ok := rec.Find(0, 0, after(key, lease.EventRenewFailed, killed)); ok {
		n := rec.Count(0, after(key, lease.EventRenewFailed, killed))
		t.Logf("%d renewals failed during the election (first: %v)", n, first.Err)
	}
	if nl := c.leader(ctx, admin); nl == old {
		t.Fatalf("the killed member is still the leader")
	}

	survivors := clientEndpoints(c.others(old)...)
	other := newLeaseClient(t, survivors, prefix)
	if _, err := other.TryAcquire(ctx, key); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("another client's TryAcquire on the held key: %v, want ErrHeld", err)
	}
	info, err := other.Inspect(ctx, key)
	if err != nil || !info.Held || info.Fence != l.Fence() {
		t.Fatalf("Inspect = %+v, %v; want held with fence %d", info, err, l.Fence())
	}
	l2, err := other.TryAcquire(ctx, "after-kill")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence() <= l.Fence() {
		t.Errorf("fence after the leader change %d, want > %d (revisions are cluster-wide)", l2.Fence(), l.Fence())
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release after the fail-over: %v", err)
	}
}

// TestClusterPartitionedHolder: the holder's only etcd member dies, so it
// cannot renew while the rest of the cluster keeps its quorum; the holder
// reports the lease lost before another client can acquire the key.
func TestClusterPartitionedHolder(t *testing.T) {
	t.Parallel() // private servers; after the conformance suite, whose leak check sees the whole process
	c := startCluster(t, 3)
	ctx := testCtx(t, 2*time.Minute)
	prefix := testPrefix()
	admin := newCli(t, c.endpoints())
	// Cut off a follower, so that the cluster itself is undisturbed.
	cut := c.others(c.leader(ctx, admin))[0]
	rec := &leasetest.Recorder{}
	holder := newLeaseClient(t, clientEndpoints(cut), prefix, lease.WithObserver(rec))
	other := newLeaseClient(t, clientEndpoints(c.others(cut)...), prefix)
	key := "partitioned"
	l, err := holder.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := rec.Find(0, 2*failoverTTL, after(key, lease.EventRenewed, time.Time{})); !ok {
		t.Fatal("no renewal before the cut")
	}
	cutAt := time.Now()
	c.kill(cut)

	// Another client tries all along; it must not win while the holder
	// still believes it holds the key.
	var l2 *lease.Lease
	var acquiredAt time.Time
	bound := failoverTTL + 3*time.Second
	for l2 == nil {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		got, err := other.TryAcquire(actx, key)
		cancel()
		switch {
		case err == nil:
			l2, acquiredAt = got, time.Now()
		case errors.Is(err, lease.ErrHeld):
		default:
			t.Logf("TryAcquire while the holder is cut off: %v", err)
		}
		if l2 == nil && time.Since(cutAt) > bound {
			t.Fatalf("the key was not free within %v of the cut (holder Err() = %v)", bound, l.Err())
		}
		if l2 == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	ev, _, ok := rec.Find(0, time.Second, leasetest.Kind(key, lease.EventLost))
	if !ok {
		t.Fatalf("another client acquired the key %v after the cut and the holder never reported it lost", acquiredAt.Sub(cutAt))
	}
	t.Logf("holder lost the lease %v after the cut (%s); another client acquired it %v after the cut",
		ev.Time.Sub(cutAt).Round(time.Millisecond), ev.Reason, acquiredAt.Sub(cutAt).Round(time.Millisecond))
	if !ev.Time.Before(acquiredAt) {
		t.Errorf("the holder reported the loss at %v, not before another client acquired the key at %v", ev.Time, acquiredAt)
	}
	if d := ev.Time.Sub(cutAt); d > failoverTTL+time.Second {
		t.Errorf("lost %v after the cut, want within the TTL %v (+1s)", d, failoverTTL)
	}
	if !errors.Is(l.Err(), lease.ErrLost) {
		t.Errorf("holder Err() = %v, want ErrLost", l.Err())
	}
	if l2.Fence() <= l.Fence() {
		t.Errorf("new fence %d, want > %d", l2.Fence(), l.Fence())
	}
}

// TestClusterNoQuorum: two of three members die; nobody can renew or
// acquire; the holder reports the lease lost within its TTL; once the
// members are back, another client acquires the key with a larger fence.
func TestClusterNoQuorum(t *testing.T) {
	t.Parallel() // private servers; after the conformance suite, whose leak check sees the whole process
	c := startCluster(t, 3)
	ctx := testCtx(t, 3*time.Minute)
	prefix := testPrefix()
	rec := &leasetest.Recorder{}
	holder := newLeaseClient(t, c.endpoints(), prefix, lease.WithObserver(rec))
	other := newLeaseClient(t, c.endpoints(), prefix)
	key := "no-quorum"
	l, err := holder.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := rec.Find(0, 2*failoverTTL, after(key, lease.EventRenewed, time.Time{})); !ok {
		t.Fatal("no renewal before the kill")
	}
	admin := newCli(t, c.endpoints())
	dead := c.others(c.leader(ctx, admin)) // the two followers
	killed := time.Now()
	for _, nd := range dead {
		c.kill(nd)
	}

	select {
	case <-l.Done():
	case <-time.After(failoverTTL + 2*time.Second):
		t.Fatalf("the lease was not reported lost within %v of losing the quorum", failoverTTL+2*time.Second)
	}
	ev, _, _ := rec.Find(0, time.Second, leasetest.Kind(key, lease.EventLost))
	t.Logf("lost %v after the quorum was lost (%s: %v)", time.Since(killed).Round(time.Millisecond), ev.Reason, ev.Err)
	if ev.Reason != lease.LossDeadline {
		t.Errorf("loss reason %q, want %q", ev.Reason, lease.LossDeadline)
	}
	actx, cancel := context.WithTimeout(ctx, time.Second)
	if l2, err := other.TryAcquire(actx, key); err == nil {
		t.Errorf("TryAcquire without a quorum succeeded (fence %d)", l2.Fence())
	}
	cancel()

	for _, nd := range dead {
		c.start(nd)
	}
	c.waitReady(c.endpoints(), time.Minute)
	t.Logf("quorum back %v after the kill", time.Since(killed).Round(time.Millisecond))
	actx, cancel = context.WithTimeout(ctx, 4*failoverTTL)
	defer cancel()
	l2, err := other.Acquire(actx, key)
	if err != nil {
		t.Fatalf("Acquire once the quorum is back: %v", err)
	}
	t.Logf("acquired by another client %v after the kill", time.Since(killed).Round(time.Millisecond))
	if l2.Fence() <= l.Fence() {
		t.Errorf("new fence %d, want > %d", l2.Fence(), l.Fence())
	}
}

// TestServerMinTTL: a server whose minimum lease TTL is above the TTL asked
// for (election timeout 3s: minimum 4.5s, 5s in whole seconds) makes
// Acquire fail with ErrInvalid instead of silently keeping the key longer.
func TestServerMinTTL(t *testing.T) {
	c := startCluster(t, 1, "--heartbeat-interval", "300", "--election-timeout", "3000")
	ctx := testCtx(t, time.Minute)
	s := newStore(t, newCli(t, c.endpoints()), testPrefix())
	r := driver.Request{Key: "k", Token: randHex(16), Holder: "h", TTL: 3 * time.Second}
	_, err := s.Acquire(ctx, r)
	if !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("Acquire with a TTL of 3s on a server with a 5s minimum: %v, want ErrInvalid", err)
	}
	t.Logf("Acquire: %v", err)
	r.TTL = 5 * time.Second
	if _, err := s.Acquire(ctx, r); err != nil {
		t.Fatalf("Acquire with a TTL of 5s: %v", err)
	}
}
