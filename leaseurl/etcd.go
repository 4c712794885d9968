// The etcd:// and etcds:// (TLS) schemes: etcdlease over an etcd v3 client.

package leaseurl

import (
	"context"
	"crypto/tls"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/etcdlease"
)

func init() {
	Register("etcd", openEtcd)
	Register("etcds", openEtcd)
}

// etcdDialTimeout bounds the first connection to the cluster.
const etcdDialTimeout = 5 * time.Second

// openEtcd connects to etcd://[user:pass@]host:port,host:port[/prefix/]. The
// path, when not empty, is the key prefix (default etcdlease.DefaultPrefix);
// etcds:// dials with TLS and the system's roots.
func openEtcd(ctx context.Context, u *url.URL, o *Options) (driver.Store, func() error, error) {
	eps := hostList(u.Host, "2379")
	if len(eps) == 0 {
		return nil, nil, lease.Invalid("store", "etcd URL has no host:port")
	}
	if u.RawQuery != "" {
		return nil, nil, lease.Invalid("store", "etcd URLs take no options besides prefix and max_waiters")
	}
	var opts []etcdlease.Option
	if n, ok, err := o.maxWaiters(); err != nil {
		return nil, nil, err
	} else if ok {
		opts = append(opts, etcdlease.WithMaxWaiters(n))
	}
	prefix := u.Path
	if p, ok := o.Take("prefix"); ok {
		prefix = p
	}
	if prefix != "" && prefix != "/" {
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		opts = append(opts, etcdlease.WithPrefix(prefix))
	}
	cfg := clientv3.Config{
		Endpoints:   eps,
		DialTimeout: etcdDialTimeout,
		Logger:      zap.NewNop(),
		Context:     context.WithoutCancel(ctx),
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	if lowerScheme(u) == "etcds" {
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	s, err := etcdlease.New(cli, opts...)
	if err != nil {
		_ = cli.Close()
		return nil, nil, err
	}
	return s, cli.Close, nil
}
