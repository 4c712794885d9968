package etcdfence_test

import (
	"context"
	"errors"
	"log"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence/etcdfence"
)

// The leader announces its address under its fence.
func ExamplePut() {
	var (
		ctx  context.Context
		cli  *clientv3.Client
		l    *lease.Lease
		addr string
	)
	err := etcdfence.Put(ctx, cli, "/config/leader", l.Fence(), addr)
	if errors.Is(err, lease.ErrStaleFence) {
		log.Print("a newer leader has written; step down")
	}
}
