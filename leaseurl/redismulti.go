// The redis+cluster:// and redis+sentinel:// schemes (rediss+... for TLS):
// redislease over a go-redis ClusterClient or a Sentinel failover client,
// and the Redis options shared by every Redis scheme.

package leaseurl

import (
	"context"
	"crypto/tls"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/redislease"
)

func init() {
	Register("redis+cluster", openRedisCluster)
	Register("rediss+cluster", openRedisCluster)
	Register("redis+sentinel", openRedisSentinel)
	Register("rediss+sentinel", openRedisSentinel)
}

// redisStoreOptions takes the leasekit options of every Redis scheme:
// prefix, max_waiters, and replica_ack=N with replica_ack_timeout=D (default 100ms) for
// redislease.WithReplicaAck.
func redisStoreOptions(o *Options) ([]redislease.Option, error) {
	var opts []redislease.Option
	if p, ok := o.Take("prefix"); ok {
		opts = append(opts, redislease.WithPrefix(p))
	}
	if n, ok, err := o.maxWaiters(); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, redislease.WithMaxWaiters(n))
	}
	ns, hasN := o.Take("replica_ack")
	ts, hasT := o.Take("replica_ack_timeout")
	if !hasN && !hasT {
		return opts, nil
	}
	n, err := strconv.Atoi(ns)
	if err != nil && hasN {
		return nil, lease.Invalid("replica_ack", "%q is not a number of replicas", ns)
	}
	timeout := DefaultReplicaAckTimeout
	if hasT {
		if timeout, err = time.ParseDuration(ts); err != nil {
			return nil, lease.Invalid("replica_ack_timeout", "%q is not a duration", ts)
		}
	}
	return append(opts, redislease.WithReplicaAck(n, timeout)), nil
}

// DefaultReplicaAckTimeout is the WAIT timeout of a Redis URL that sets
// replica_ack but not replica_ack_timeout.
const DefaultReplicaAckTimeout = 100 * time.Millisecond

// multiHostTLS is the TLS configuration of a URL with several hosts: each
// node's certificate is checked against the address it is dialled at (an
// empty ServerName), not against the first host of the URL.
func multiHostTLS(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.InsecureSkipVerify}
}

// baseScheme is "redis" or "rediss" for a redis+... or rediss+... URL.
func baseScheme(u *url.URL) string {
	s, _, _ := strings.Cut(lowerScheme(u), "+")
	return s
}

// goRedisURL rewrites a multi-host URL for go-redis's parsers: the first
// host stays, the others become addr= options. userinfo, path and query are
// the caller's.
func goRedisURL(u *url.URL, hosts []string, user *url.Userinfo, path string, q url.Values) string {
	q2 := url.Values{}
	for k, v := range q {
		q2[k] = append([]string(nil), v...)
	}
	for _, h := range hosts[1:] {
		q2.Add("addr", h)
	}
	return (&url.URL{Scheme: baseScheme(u), User: user, Host: hosts[0], Path: path, RawQuery: q2.Encode()}).String()
}

// openRedisCluster connects to redis+cluster://[user:pass@]h1:p1,h2:p2[?opts]:
// a go-redis ClusterClient seeded with every host (the others are found from
// the cluster). Options are those of redis.ParseClusterURL (dial_timeout,
// read_timeout, max_redirects, ...) besides leasekit's. A cluster has no
// database number, so the path must be empty.
func openRedisCluster(_ context.Context, u *url.URL, o *Options) (driver.Store, func() error, error) {
	opts, err := redisStoreOptions(o)
	if err != nil {
		return nil, nil, err
	}
	hosts := hostList(u.Host, "6379")
	if len(hosts) == 0 {
		return nil, nil, lease.Invalid("store", "Redis Cluster URL has no host:port")
	}
	if u.Path != "" && u.Path != "/" {
		return nil, nil, lease.Invalid("store", "a Redis Cluster URL takes no path (a cluster has only database 0)")
	}
	copt, err := redis.ParseClusterURL(goRedisURL(u, hosts, u.User, "", u.Query()))
	if err != nil {
		return nil, nil, lease.Invalid("store", "%v", err)
	}
	copt.TLSConfig = multiHostTLS(copt.TLSConfig)
	rdb := redis.NewClusterClient(copt)
	s, err := redislease.New(rdb, opts...)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return s, rdb.Close, nil
}

// openRedisSentinel connects to
// redis+sentinel://[user:pass@]s1:p1,s2:p2/mastername[/db][?opts]: a
// go-redis failover client that asks the sentinels for the current primary
// of mastername and follows failovers. The user and password are those of
// the Redis servers; sentinel_username and sentinel_password give the
// sentinels' own, if they require one. db may also be given as db=N; other
// options are those of redis.ParseFailoverURL.
func openRedisSentinel(_ context.Context, u *url.URL, o *Options) (driver.Store, func() error, error) {
	opts, err := redisStoreOptions(o)
	if err != nil {
		return nil, nil, err
	}
	hosts := hostList(u.Host, "26379")
	if len(hosts) == 0 {
		return nil, nil, lease.Invalid("store", "Redis Sentinel URL has no sentinel host:port")
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if parts[0] == "" || len(parts) > 2 {
		return nil, nil, lease.Invalid("store", "a Redis Sentinel URL names the primary: redis+sentinel://host:port,host:port/mastername[/db]")
	}
	q := u.Query()
	if q.Has("master_name") {
		return nil, nil, lease.Invalid("store", "give the master name as the URL path, not master_name=")
	}
	q.Set("master_name", parts[0])
	if len(parts) == 2 {
		q.Set("db", parts[1])
	}
	// go-redis reads the sentinels' credentials from the userinfo and the
	// servers' from username= and password=: swap them into place.
	var sentinelUser *url.Userinfo
	su, hasSU := q["sentinel_username"]
	sp, hasSP := q["sentinel_password"]
	if hasSU || hasSP {
		name, pw := "", ""
		if len(su) > 0 {
			name = su[len(su)-1]
		}
		if len(sp) > 0 {
			pw = sp[len(sp)-1]
		}
		sentinelUser = url.UserPassword(name, pw)
		q.Del("sentinel_username")
		q.Del("sentinel_password")
	}
	if q.Has("username") || q.Has("password") {
		return nil, nil, lease.Invalid("store", "give the Redis user and password in the URL's userinfo (user:pass@), not as options")
	}
	if u.User != nil {
		q.Set("username", u.User.Username())
		if pw, ok := u.User.Password(); ok {
			q.Set("password", pw)
		}
	}
	fopt, err := redis.ParseFailoverURL(goRedisURL(u, hosts, sentinelUser, "", q))
	if err != nil {
		return nil, nil, lease.Invalid("store", "%v", err)
	}
	fopt.TLSConfig = multiHostTLS(fopt.TLSConfig)
	rdb := redis.NewFailoverClient(fopt)
	s, err := redislease.New(rdb, opts...)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return s, rdb.Close, nil
}
