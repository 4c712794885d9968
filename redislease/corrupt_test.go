package redislease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
)

// TestCorruptValues: values we did not write under a lease's keys are
// ErrCorrupt for every operation, never a free key or a grant.
func TestCorruptValues(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	tok := token(t)
	for _, tc := range []struct {
		what  string
		write func(lk string) error
	}{
		{"a string of another format", func(lk string) error { return c.Set(ctx, lk, "garbage", 0).Err() }},
		{"an empty string", func(lk string) error { return c.Set(ctx, lk, "", 0).Err() }},
		{"a non-numeric fence", func(lk string) error { return c.Set(ctx, lk, tok+"\x0012x\x00h", 0).Err() }},
		{"a fence of 25 digits", func(lk string) error {
			return c.Set(ctx, lk, tok+"\x001234567890123456789012345\x00h", 0).Err()
		}},
		{"a hash", func(lk string) error { return c.HSet(ctx, lk, "token", tok).Err() }},
		{"a list", func(lk string) error { return c.RPush(ctx, lk, tok).Err() }},
	} {
		key := "corrupt-" + randHex(t, 4)
		if err := tc.write(leaseKey(s.Prefix(), key)); err != nil {
			t.Fatal(err)
		}
		leasetest.WantCorrupt(t, s, key, tok, tc.what)
	}
}

// TestCorruptFenceCounter: a fence counter that is no number is never
// granted over.
func TestCorruptFenceCounter(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	for what, write := range map[string]func(k string) error{
		"a word": func(k string) error { return c.Set(ctx, k, "many", 0).Err() },
		"a set":  func(k string) error { return c.SAdd(ctx, k, "1").Err() },
	} {
		key := "counter-" + randHex(t, 4)
		if err := write(leaseKey(s.Prefix(), key) + ":fence"); err != nil {
			t.Fatal(err)
		}
		if g, err := s.Acquire(ctx, req(key, token(t), "h", time.Minute)); !errors.Is(err, lease.ErrCorrupt) {
			t.Errorf("fence counter %s: Acquire = %+v, %v; want ErrCorrupt", what, g, err)
		}
	}
}

// TestCorruptInBatch: in AcquireMany and ReleaseMany, which run one script
// for the whole batch, a corrupt key fails its own request only.
func TestCorruptInBatch(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	rs := make([]driver.Request, 3)
	for i := range rs {
		rs[i] = req("batch-"+randHex(t, 4), token(t), "h", time.Minute)
	}
	if err := c.HSet(ctx, leaseKey(s.Prefix(), rs[1].Key), "token", rs[1].Token).Err(); err != nil {
		t.Fatal(err)
	}
	gs, errs := s.AcquireMany(ctx, rs)
	if errs[0] != nil || errs[2] != nil || gs[0].Fence == 0 || gs[2].Fence == 0 || !errors.Is(errs[1], lease.ErrCorrupt) {
		t.Fatalf("AcquireMany with a corrupt middle key = %+v, %v; want grants beside ErrCorrupt", gs, errs)
	}
	if errs := s.ReleaseMany(ctx, rs); errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], lease.ErrCorrupt) {
		t.Errorf("ReleaseMany with a corrupt middle key = %v; want nil beside ErrCorrupt", errs)
	}
}
