// Tests of List and Break beyond the conformance suite: tombstones seen by
// List and Watch, what else an advisory Break ends, and the upgrade.

package pglease_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/pglease"
)

// TestBreakTombstones: after a Break, List names the evicted token among
// Broken, and its Release (with no renewal first) is refused; another lease
// of the holder's store lives on in table mode and is lost, not broken, in
// advisory mode, whose Break ended its session.
func TestBreakTombstones(t *testing.T) {
	pool := sharedPool(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			ns := namespace(t)
			s, ops := storeNS(t, pool, mode, ns), storeNS(t, pool, mode, ns)
			a, b := req("a", "stuck", 30*time.Second), req("b", "bystander", 30*time.Second)
			for _, r := range []driver.Request{a, b} {
				if _, err := s.Acquire(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := ops.Break(ctx, "a"); err != nil {
				t.Fatalf("Break: %v", err)
			}
			page, _, err := ops.List(ctx, "", "", 10)
			if err != nil || len(page) == 0 || page[0].Key != "a" || len(page[0].Holders) != 0 || !slices.Equal(page[0].Broken, []string{a.Token}) {
				t.Errorf("List after Break = %+v, %v; want a first, no holder, the evicted token broken", page, err)
			}
			if err := s.Release(ctx, a); !errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("Release of the evicted token = %v, want one matching ErrNotHeld", err)
			}
			err = s.Renew(ctx, b)
			if mode == pglease.ModeAdvisory && (!errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrBroken)) {
				t.Errorf("Renew of the other lease of the ended session = %v, want ErrNotHeld, not ErrBroken", err)
			}
			if mode == pglease.ModeTable && err != nil {
				t.Errorf("Renew of another lease = %v", err)
			}
		})
	}
}

// TestWatchBrokenAdvisory: a watcher sees a Break of an advisory lease as a
// break, not a release.
func TestWatchBrokenAdvisory(t *testing.T) {
	pool := sharedPool(t)
	ctx := testCtx(t, 60*time.Second)
	ns := namespace(t)
	// 6 s: the tombstone lives until the evicted hold would have expired,
	// and the watcher must list it before then, on a loaded machine too.
	holder := newClient(t, storeNS(t, pool, pglease.ModeAdvisory, ns), lease.WithTTL(6*time.Second))
	ops := newClient(t, storeNS(t, pool, pglease.ModeAdvisory, ns))
	l, err := holder.TryAcquire(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	changes := make(chan lease.Change, 64)
	go func() {
		defer close(changes)
		for ch, err := range ops.Watch(wctx, "", 50*time.Millisecond) {
			if err == nil {
				changes <- ch
			}
		}
	}()
	// The watcher has listed the holder of w once it reports a probe
	// acquired after it started (a probe its first listing already showed
	// makes no change: released, and acquired again).
	for seen := false; !seen; {
		p, err := holder.TryAcquire(ctx, "probe")
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.After(2 * time.Second); !seen; {
			select {
			case ch := <-changes:
				seen = ch.Key == "probe" && ch.Kind == lease.ChangeAcquired
				if ch.Key == "w" {
					t.Fatalf("the watcher saw %s of w before the break", ch.Kind)
				}
				continue
			case <-deadline:
			}
			break
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ops.ForceRelease(ctx, "w"); err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}
	for deadline := time.After(10 * time.Second); ; {
		select {
		case ch := <-changes:
			if ch.Key != "w" {
				continue
			}
			if ch.Kind != lease.ChangeBroken {
				t.Errorf("the watcher saw %s, want broken", ch.Kind)
			}
		case <-deadline:
			t.Fatal("the watcher saw nothing of w within 10s")
		}
		break
	}
	<-l.Done()
	if !errors.Is(l.Err(), lease.ErrBroken) {
		t.Errorf("the broken lease's Err = %v, want one matching ErrBroken", l.Err())
	}
}
