// Batches on a single node: one EVALSHA runs the requests that share a
// holder, TTL, queue mode and sharing; a batch of several kinds is several
// EVALSHAs, each request with its own holder and TTL; a release in a batch
// announces its key, escapes undone.

package redislease_test

import (
	"slices"
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
)

func TestBatchOfSeveralKinds(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	sub := c.Subscribe(ctx, s.Prefix()+"released")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription is confirmed
		t.Fatal(err)
	}
	keys := []string{"plain", "50%", "{tag}", "a}b{c%7B", "%25", "shared"}
	rs := make([]driver.Request, len(keys))
	for i, k := range keys {
		rs[i] = req(k, token(t), []string{"A", "B"}[i%2], []time.Duration{time.Minute, 30 * time.Second}[i/3])
	}
	rs[5].Shared = true
	gs, errs := s.AcquireMany(ctx, rs)
	for i, r := range rs {
		if errs[i] != nil || gs[i].Fence == 0 {
			t.Fatalf("AcquireMany, request %d (%q): %+v, %v", i, r.Key, gs[i], errs[i])
		}
		info, err := s.Inspect(ctx, r.Key)
		if err != nil || !info.Held || info.Holder != r.Holder || info.Fence != gs[i].Fence ||
			info.Remaining > r.TTL || info.Remaining < r.TTL-10*time.Second {
			t.Errorf("Inspect(%q) = %+v, %v; want held by %s, fence %d, about %v left", r.Key, info, err, r.Holder, gs[i].Fence, r.TTL)
		}
	}
	other := req("plain", token(t), "C", time.Minute)
	rel := append(slices.Clone(rs), other)
	errs = s.ReleaseMany(ctx, rel)
	for i, r := range rs {
		if errs[i] != nil {
			t.Errorf("ReleaseMany, request %d (%q): %v", i, r.Key, errs[i])
		}
		if info, err := s.Inspect(ctx, r.Key); err != nil || info.Held {
			t.Errorf("after ReleaseMany: Inspect(%q) = %+v, %v; want free", r.Key, info, err)
		}
	}
	if errs[len(rs)] == nil {
		t.Errorf("ReleaseMany of a token that never held %q: no error", other.Key)
	}
	var heard []string
	for range keys {
		m, err := sub.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("after %q: %v", heard, err)
		}
		heard = append(heard, m.Payload)
	}
	slices.Sort(heard)
	want := slices.Sorted(slices.Values(keys))
	if !slices.Equal(heard, want) {
		t.Errorf("announced %q, want %q", heard, want)
	}
}
