// Package etcdfence makes a write to an etcd key conditional on a lease's
// fence. The largest fence the key accepted is kept beside it, at
// FenceKey(key), as 20 zero-padded decimal digits so that etcd's byte-wise
// value comparison orders fences as numbers; Put compares and writes both
// in one transaction:
//
//	err := etcdfence.Put(ctx, cli, "/config/leader", l.Fence(), addr)
//	// errors.Is(err, lease.ErrStaleFence): a newer holder has written.
//
// Readers Get the key as usual. Why this is atomic: docs/design.md,
// "Fenced writes".
package etcdfence

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
)

// FenceKey returns the key that keeps key's fence: key, a NUL byte and
// "fence", which sorts right after key and aliases no key without a NUL.
func FenceKey(key string) string { return key + "\x00fence" }

// Put writes value to key (with opts, such as clientv3.WithLease) and fence
// to FenceKey(key) in one transaction, unless the fence stored there is
// larger: then it writes nothing and returns a *lease.StaleFenceError
// (matching lease.ErrStaleFence).
func Put(ctx context.Context, kv clientv3.KV, key string, fence uint64, value string, opts ...clientv3.OpOption) error {
	fk, f := FenceKey(key), fmt.Sprintf("%020d", fence)
	// A value comparison with a missing key fails, so a first write lands.
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(fk), ">", f)).
		Then(clientv3.OpGet(fk)).
		Else(clientv3.OpPut(key, value, opts...), clientv3.OpPut(fk, f)).
		Commit()
	if err != nil {
		return fmt.Errorf("etcdfence: put %q: %w", key, err)
	}
	if !resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return fmt.Errorf("etcdfence: put %q: the fence key vanished", key)
	}
	stored, err := strconv.ParseUint(string(kvs[0].Value), 10, 64)
	if err != nil || len(kvs[0].Value) != len(f) {
		return fmt.Errorf("etcdfence: put %q: fence key holds %q, not 20 digits", key, kvs[0].Value)
	}
	return fmt.Errorf("etcdfence: %w", &lease.StaleFenceError{Resource: "etcd key " + strconv.Quote(key), Fence: fence, Stored: stored})
}
