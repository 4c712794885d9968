package zklease

import (
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// FuzzNodeData: any node data decodes to a lease's data with a TTL, or to
// an error matching lease.ErrCorrupt; never a panic. What encodeData writes
// decodes back.
func FuzzNodeData(f *testing.F) {
	f.Add(encodeData(driver.Request{Token: "0123456789abcdef0123456789abcdef", Holder: "h", TTL: time.Second}, 7))
	f.Add([]byte(`{"token":"t","ttl_ms":0}`))
	f.Add([]byte(`{"token":1}`))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeData(data)
		switch {
		case err != nil && !errors.Is(err, lease.ErrCorrupt):
			t.Fatalf("decodeData(%q): %v, want ErrCorrupt", data, err)
		case err == nil && (d.TTLms <= 0 || d.Epoch < 0):
			t.Fatalf("decodeData(%q) = %+v: no TTL or a negative epoch accepted", data, d)
		}
		if err == nil {
			r := driver.Request{Token: d.Token, Holder: d.Holder, TTL: time.Duration(d.TTLms) * time.Millisecond}
			if back, err := decodeData(encodeData(r, d.Epoch)); err != nil || back != d {
				t.Fatalf("round trip of %+v: %+v, %v", d, back, err)
			}
		}
	})
}
