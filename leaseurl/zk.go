// The zk:// scheme: zklease over a ZooKeeper session.

package leaseurl

import (
	"context"
	"net/url"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/zklease"
)

func init() { Register("zk", openZK) }

// DefaultZKSessionTimeout is the session timeout zk:// URLs ask for when
// they have no session_timeout option. The server may negotiate it down; it
// is then the store's maximum TTL.
const DefaultZKSessionTimeout = 10 * time.Second

// openZK dials zk://[user:pass@]host:port,host:port[/root][?session_timeout=10s].
// The path is the root znode of the keys (default zklease.DefaultRoot). A
// user and password authenticate with the digest scheme, and the store then
// creates its nodes with the creator ACL (that identity only) and refuses a
// root open to anyone (zklease.ErrOpenRoot); without them, every node is
// open to anyone (world:anyone).
func openZK(ctx context.Context, u *url.URL, o *Options) (driver.Store, func() error, error) {
	servers := hostList(u.Host, "2181")
	if len(servers) == 0 {
		return nil, nil, lease.Invalid("store", "zk URL has no host:port")
	}
	if u.RawQuery != "" {
		return nil, nil, lease.Invalid("store", "zk URLs take no options besides session_timeout and max_waiters")
	}
	timeout := DefaultZKSessionTimeout
	if v, ok := o.Take("session_timeout"); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, nil, lease.Invalid("session_timeout", "%q is not a positive duration", v)
		}
		timeout = d
	}
	var opts []zklease.Option
	if n, ok, err := o.maxWaiters(); err != nil {
		return nil, nil, err
	} else if ok {
		opts = append(opts, zklease.WithMaxWaiters(n))
	}
	if u.Path != "" && u.Path != "/" {
		opts = append(opts, zklease.WithRoot(u.Path))
	}
	if u.User != nil {
		pass, _ := u.User.Password()
		opts = append(opts, zklease.WithAuth("digest", []byte(u.User.Username()+":"+pass)))
	}
	// Dial owns the connection: the store's Close ends the session.
	s, err := zklease.Dial(ctx, servers, timeout, opts...)
	if err != nil {
		return nil, nil, err
	}
	return s, nil, nil
}
