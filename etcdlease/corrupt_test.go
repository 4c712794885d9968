package etcdlease_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease/leasetest"
)

// TestForeignKeys: a lease key holding what this package never writes is
// ErrCorrupt, never a grant.
func TestForeignKeys(t *testing.T) {
	cli := newCli(t, endpoints(t))
	prefix := testPrefix()
	s := newStore(t, cli, prefix)
	ctx := testCtx(t, time.Minute)
	t.Cleanup(func() { _, _ = cli.Delete(testCtx(t, 10*time.Second), prefix, clientv3.WithPrefix()) })
	grant, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	tok := randHex(16)
	for _, tc := range []struct {
		what, value string
		opts        []clientv3.OpOption
	}{
		{"a value without a token", "garbage", nil},
		{"an empty value", "", nil},
		{"an empty token", "\x00holder", []clientv3.OpOption{clientv3.WithLease(grant.ID)}},
		{"a token without an etcd lease", randHex(16) + "\x00holder", nil},
	} {
		key := "foreign-" + randHex(4)
		if _, err := cli.Put(ctx, prefix+key, tc.value, tc.opts...); err != nil {
			t.Fatal(err)
		}
		leasetest.WantCorrupt(t, s, key, tok, tc.what)
	}
}
