// The nats:// and natss:// (TLS) schemes: natslease over a NATS connection.

package leaseurl

import (
	"context"
	"crypto/tls"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/natslease"
)

func init() {
	Register("nats", openNATS)
	Register("natss", openNATS)
}

// natsDialTimeout bounds the first connection to a server.
const natsDialTimeout = 5 * time.Second

// openNATS connects to nats://[user:pass@]host:port,host:port[/bucket]
// [?token=T&namespace=NS]: the path is the KV bucket (default
// natslease.DefaultBucket); natss:// dials with TLS and the system's roots.
func openNATS(ctx context.Context, u *url.URL, o *Options) (driver.Store, func() error, error) {
	hosts := hostList(u.Host, "4222")
	if len(hosts) == 0 {
		return nil, nil, lease.Invalid("store", "nats URL has no host:port")
	}
	q := u.Query()
	token := q.Get("token")
	if q.Del("token"); len(q) > 0 {
		return nil, nil, lease.Invalid("store", "nats URLs take no options besides token, namespace and the bucket as the path")
	}
	opts := []nats.Option{nats.Name("leasekit"), nats.Timeout(natsDialTimeout)}
	if u.User != nil {
		pass, _ := u.User.Password()
		opts = append(opts, nats.UserInfo(u.User.Username(), pass))
	}
	if token != "" {
		opts = append(opts, nats.Token(token))
	}
	if lowerScheme(u) == "natss" {
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	var sopts []natslease.Option
	if b := strings.Trim(u.Path, "/"); b != "" {
		sopts = append(sopts, natslease.WithBucket(b))
	}
	if ns, ok := o.Take("namespace"); ok {
		sopts = append(sopts, natslease.WithNamespace(ns))
	}
	for i, h := range hosts {
		hosts[i] = "nats://" + h
	}
	nc, err := nats.Connect(strings.Join(hosts, ","), opts...)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		var s *natslease.Store
		if s, err = natslease.New(ctx, js, sopts...); err == nil {
			return s, func() error { nc.Close(); return nil }, nil
		}
	}
	nc.Close()
	return nil, nil, err
}
