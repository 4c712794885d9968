package etcdfence_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence/etcdfence"
	"github.com/leasekit/lease/fence/internal/fencetest"
	"github.com/leasekit/lease/leasetest"
)

func newClient(t *testing.T) *clientv3.Client {
	eps := strings.Split(leasetest.Env(t, "LEASE_TEST_ETCD_ENDPOINTS"), ",")
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New(%v): %v", eps, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// newKey returns a fresh key, deleted with its fence when the test ends.
func newKey(t *testing.T, cli *clientv3.Client) string {
	key := "/etcdfence-test/" + randHex(8)
	t.Cleanup(func() { _, _ = cli.Delete(context.Background(), key, clientv3.WithPrefix()) })
	return key
}

// TestPut runs the fenced-write scenario.
func TestPut(t *testing.T) {
	cli := newClient(t)
	fencetest.Run(t, func(t *testing.T) fencetest.Resource {
		key := newKey(t, cli)
		return fencetest.Resource{
			Write: func(ctx context.Context, fence uint64, v string) error {
				return etcdfence.Put(ctx, cli, key, fence, v)
			},
			Read: func(ctx context.Context) (string, error) {
				resp, err := cli.Get(ctx, key)
				if err != nil || len(resp.Kvs) == 0 {
					return "", err
				}
				return string(resp.Kvs[0].Value), nil
			},
		}
	})
}

// TestPutOptions: opts apply to the value (here an etcd lease), not to the
// fence, which outlives it.
func TestPutOptions(t *testing.T) {
	ctx := context.Background()
	cli := newClient(t)
	key := newKey(t, cli)
	g, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	if err := etcdfence.Put(ctx, cli, key, 9, "v", clientv3.WithLease(g.ID)); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, err := cli.Revoke(ctx, g.ID); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if resp, err := cli.Get(ctx, key); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("Get after the value's lease ended: %v, %v; want no key", resp, err)
	}
	if err := etcdfence.Put(ctx, cli, key, 8, "stale"); !errors.Is(err, lease.ErrStaleFence) {
		t.Fatalf("Put with an older fence after the value expired: %v, want ErrStaleFence", err)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
