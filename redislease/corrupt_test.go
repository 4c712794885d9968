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

// TestCorruptFenceCounter: a fence counter that is no number, or one
// beyond 2^53 (Lua's numbers are doubles), is never granted over.
func TestCorruptFenceCounter(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	for what, write := range map[string]func(k string) error{
		"a word": func(k string) error { return c.Set(ctx, k, "many", 0).Err() },
		"a set":  func(k string) error { return c.SAdd(ctx, k, "1").Err() },
		"2^53":   func(k string) error { return c.Set(ctx, k, "9007199254740992", 0).Err() },
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

// TestCorruptInBatch: AcquireMany and ReleaseMany run one script for a
// whole batch, yet a corrupt key fails its own request only: the other
// requests are granted and released, and the corrupt values stay as they
// were.
func TestCorruptInBatch(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	tok := token(t)
	corrupt := []struct {
		what   string
		suffix string // of the lease key: the key written
		write  func(k string) error
		held   bool // whether the lease key is corrupt, so release fails too
	}{
		{"a lease of another format", "", func(k string) error { return c.Set(ctx, k, "garbage", 0).Err() }, true},
		{"a lease hash", "", func(k string) error { return c.HSet(ctx, k, "token", tok).Err() }, true},
		{"a fence counter word", ":fence", func(k string) error { return c.Set(ctx, k, "many", 0).Err() }, false},
		{"a fence counter set", ":fence", func(k string) error { return c.SAdd(ctx, k, "1").Err() }, false},
	}
	// Good requests before, between and after the corrupt ones.
	rs := make([]driver.Request, 2*len(corrupt)+1)
	bad := map[int]int{} // request -> corrupt
	for i := range rs {
		rs[i] = req("batch-"+randHex(t, 4), token(t), "h", time.Minute)
		if i%2 == 1 {
			bad[i] = i / 2
			if err := corrupt[i/2].write(leaseKey(s.Prefix(), rs[i].Key) + corrupt[i/2].suffix); err != nil {
				t.Fatal(err)
			}
		}
	}
	dump := func(i int) string {
		return c.Dump(ctx, leaseKey(s.Prefix(), rs[i].Key)+corrupt[bad[i]].suffix).Val()
	}
	before := map[int]string{}
	for i := range bad {
		before[i] = dump(i)
	}
	gs, errs := s.AcquireMany(ctx, rs)
	for i, r := range rs {
		if k, ok := bad[i]; ok {
			if !errors.Is(errs[i], lease.ErrCorrupt) {
				t.Errorf("AcquireMany beside good keys, %s: %+v, %v; want ErrCorrupt", corrupt[k].what, gs[i], errs[i])
			}
			continue
		}
		info, err := s.Inspect(ctx, r.Key)
		if errs[i] != nil || gs[i].Fence == 0 || err != nil || !info.Held || info.Fence != gs[i].Fence {
			t.Errorf("AcquireMany beside corrupt keys, request %d: %+v, %v; Inspect %+v, %v", i, gs[i], errs[i], info, err)
		}
	}
	errs = s.ReleaseMany(ctx, rs)
	for i, r := range rs {
		if k, ok := bad[i]; ok {
			if want := lease.ErrNotHeld; corrupt[k].held && !errors.Is(errs[i], lease.ErrCorrupt) || !corrupt[k].held && !errors.Is(errs[i], want) {
				t.Errorf("ReleaseMany beside good keys, %s: %v", corrupt[k].what, errs[i])
			}
			if dump(i) != before[i] {
				t.Errorf("%s: changed by AcquireMany and ReleaseMany", corrupt[k].what)
			}
			continue
		}
		if info, err := s.Inspect(ctx, r.Key); errs[i] != nil || err != nil || info.Held {
			t.Errorf("ReleaseMany beside corrupt keys, request %d: %v; Inspect %+v, %v", i, errs[i], info, err)
		}
	}
}
