package redisfence_test

import (
	"context"
	"errors"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence/redisfence"
)

// The holder of the "report" lease publishes the report under its fence.
func ExampleSet() {
	var (
		ctx  context.Context
		rdb  *redis.Client
		l    *lease.Lease
		body string
	)
	err := redisfence.Set(ctx, rdb, "report:daily", l.Fence(), body)
	if errors.Is(err, lease.ErrStaleFence) {
		log.Print("a newer holder has published; stop")
	}
}
