package natslease

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// FuzzRecord: any KV value decodes to a record whose holder has a TTL, or
// to an error matching lease.ErrCorrupt; never a panic. What put writes
// decodes back.
func FuzzRecord(f *testing.F) {
	for _, rec := range []record{{Token: "0123456789abcdef0123456789abcdef", Holder: "h", TTL: time.Second},
		{Broken: []tombstone{{Token: "t", Until: 5}}}, {}} {
		b, _ := json.Marshal(rec)
		f.Add(b)
	}
	f.Add([]byte(`{"t":5}`))
	f.Add([]byte(`{"t":"x","ttl":-1}`))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, value []byte) {
		st, err := decode(value, 9, time.Unix(0, 0))
		switch {
		case err != nil && !errors.Is(err, lease.ErrCorrupt):
			t.Fatalf("decode(%q): %v, want ErrCorrupt", value, err)
		case err == nil && (st.TTL < 0 || st.Token != "" && st.TTL == 0):
			t.Fatalf("decode(%q) = %+v: a holder without a TTL accepted", value, st.record)
		}
		if err == nil {
			b, err := json.Marshal(st.record)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decode(b, 9, time.Unix(0, 0)); err != nil {
				t.Fatalf("round trip of %+v: %v", st.record, err)
			}
		}
	})
}
