// The redis:// and rediss:// schemes: redislease over a go-redis client.

package leaseurl

import (
	"context"
	"fmt"
	"net/url"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/redislease"
)

func init() {
	Register("redis", openRedis)
	Register("rediss", openRedis) // TLS: go-redis's ParseURL sets TLSConfig
}

// openRedis parses the URL with go-redis's ParseURL (so every go-redis URL
// option works) after taking leasekit's options (prefix, replica_ack,
// replica_ack_timeout) out of it.
func openRedis(_ context.Context, u *url.URL, o *Options) (driver.Store, func() error, error) {
	opts, err := redisStoreOptions(o)
	if err != nil {
		return nil, nil, err
	}
	u2 := *u
	u2.Scheme = lowerScheme(u)
	ropt, err := redis.ParseURL(u2.String())
	if err != nil {
		return nil, nil, fmt.Errorf("%w", lease.Invalid("store", "%v", err))
	}
	rdb := redis.NewClient(ropt)
	s, err := redislease.New(rdb, opts...)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return s, rdb.Close, nil
}
