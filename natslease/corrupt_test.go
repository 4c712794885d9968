package natslease_test

import (
	"testing"
	"time"

	"github.com/leasekit/lease/leasetest"
)

// TestForeignValues: a KV value this package did not write under a lease's
// key is ErrCorrupt, never a free key or a grant.
func TestForeignValues(t *testing.T) {
	_, js := connect(t, natsURL(t))
	ns := testNS()
	s := newStore(t, js, ns)
	ctx := testCtx(t, time.Minute)
	kv, err := js.KeyValue(ctx, testBucket)
	if err != nil {
		t.Fatal(err)
	}
	tok := randHex(16)
	for _, tc := range []struct{ what, value string }{
		{"a value that is no JSON", "garbage"},
		{"an empty value", ""},
		{"JSON of other types", `{"t": 5}`},
		{"a holder without a TTL", `{"t": "` + tok + `"}`},
		{"a negative TTL", `{"t": "` + tok + `", "ttl": -1}`},
	} {
		key := "foreign-" + randHex(4)
		if _, err := kv.Put(ctx, ns+"."+key, []byte(tc.value)); err != nil {
			t.Fatal(err)
		}
		leasetest.WantCorrupt(t, s, key, tok, tc.what)
	}
}
