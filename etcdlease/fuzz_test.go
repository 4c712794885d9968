package etcdlease

import (
	"bytes"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/leasekit/lease"
)

// FuzzEtcdKey: any etcd key parses to a lease key and a sub-key that the
// store writes at exactly that etcd key, or is not the store's; never a
// panic. Any value under a lease key is a hold only if it has the
// "token NUL holder" shape and an etcd lease; otherwise the key reads as
// lease.ErrCorrupt, never as free or held.
func FuzzEtcdKey(f *testing.F) {
	s := &Store{prefix: normPrefix("/app")}
	f.Add([]byte(s.keyPath("a/b%c")), []byte("t0k\x00holder"), int64(7))
	f.Add([]byte(s.subKey("x", kindWaiter, "t0k")), []byte("h"), int64(1))
	f.Add([]byte(s.subKey("x", kindEpoch, "")), []byte{}, int64(0))
	f.Add([]byte("/app/%zz\x00q/"), []byte("\x00h"), int64(-1))
	f.Fuzz(func(t *testing.T, k, v []byte, id int64) {
		if key, token, kind, ok := s.parseKey(k); ok {
			want := s.keyPath(key)
			if kind != 0 {
				want = s.subKey(key, kind, token)
			}
			if want != string(k) {
				t.Fatalf("parseKey(%q) = %q, %q, %q: the store writes that at %q", k, key, token, kind, want)
			}
		}
		st := state{holder: &mvccpb.KeyValue{Key: k, Value: v, Lease: id}}
		err := st.corrupt()
		if bad := id == 0 || bytes.IndexByte(v, 0) < 1; bad != (err != nil) || err != nil && !errors.Is(err, lease.ErrCorrupt) {
			t.Fatalf("corrupt() of value %q on etcd lease %d = %v", v, id, err)
		}
	})
}
