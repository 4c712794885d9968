package k8slease

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// FuzzCheck: check accepts any annotations or refuses them with
// ErrCorrupt, and what it accepts reads back as written: a fence below
// MaxInt64, a holder's positive TTL; a grant it writes passes (below
// MaxInt64 - 1: a grant of MaxInt64 leaves the last fence, which it refuses).
// (Its seeds run with every go test; scripts/test does not fuzz it: the
// instrumented build of client-go costs minutes.)
func FuzzCheck(f *testing.F) {
	f.Add("7", "1500", "", "tok", true)
	f.Add("many", "30s", "0x1", "tok", false)
	f.Add("9223372036854775806", "9223372036854775", "123", "", true)
	f.Add("+7", "-1", "", "tok", true)
	f.Fuzz(func(t *testing.T, fenceAnn, ttlAnn, ticket, token string, holder bool) {
		s := &Store{seen: map[string]sighting{}, clock: lease.SystemClock()}
		l := s.newLease("k")
		l.Annotations[annFence], l.Annotations[annTTL], l.Annotations[annTicket], l.Annotations[annToken] = fenceAnn, ttlAnn, ticket, token
		if h := "h"; holder {
			l.Spec.HolderIdentity = &h
		}
		err := check(l)
		switch {
		case err != nil && !errors.Is(err, lease.ErrCorrupt):
			t.Fatalf("check(%v) = %v, want ErrCorrupt", l.Annotations, err)
		case err == nil && (strconv.FormatUint(fence(l), 10) != fenceAnn || fence(l) >= math.MaxInt64):
			t.Fatalf("check(%v) accepted fence %q", l.Annotations, fenceAnn)
		case err == nil && token != "" && (ttl(l) <= 0 || !holder):
			t.Fatalf("check(%v) accepted a holder without a TTL or holderIdentity", l.Annotations)
		}
		if err == nil && fence(l) < math.MaxInt64-1 {
			ms, _ := strconv.ParseInt(ttlAnn, 10, 64)
			s.grant(l, driver.Request{Token: "t", Holder: "h", TTL: max(time.Duration(ms%1e9)*time.Millisecond, time.Millisecond)}, time.Now())
			if err := check(l); err != nil {
				t.Fatalf("a grant over %q: %v", fenceAnn, err)
			}
		}
	})
}
