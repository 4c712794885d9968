// The mysql:// scheme: mysqllease over database/sql and go-sql-driver/mysql.

package leaseurl

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/mysqllease"
)

func init() { Register("mysql", openMySQL) }

// DefaultMySQLTLS is the tls parameter Open gives a mysql:// URL that
// reaches a host that is not loopback and sets no tls: the server's
// certificate must be signed by a trusted CA and name the host. The
// driver's own default is no TLS.
const DefaultMySQLTLS = "true"

// openMySQL opens mysql://user:pass@host[:3306]/db: leasekit's options are
// mode=table|getlock, table=NAME, namespace=NS and migrate=true|false
// (default true: Open runs the idempotent CREATE TABLE IF NOT EXISTS; with
// false it checks that the table exists); every other parameter is the
// driver's (tls, timeout, ...), with interpolateParams=true unless the URL
// says otherwise, and tls=DefaultMySQLTLS for a host that is not loopback.
// It connects once, so that an unreachable server fails Open.
func openMySQL(ctx context.Context, u *url.URL, o *Options) (driver.Store, func() error, error) {
	var opts []mysqllease.Option
	if m, ok := o.Take("mode"); ok {
		switch m {
		case "table", "":
			opts = append(opts, mysqllease.WithMode(mysqllease.ModeTable))
		case "getlock":
			opts = append(opts, mysqllease.WithMode(mysqllease.ModeGetLock))
		default:
			return nil, nil, lease.Invalid("mode", "%q (want table or getlock)", m)
		}
	}
	if t, ok := o.Take("table"); ok {
		opts = append(opts, mysqllease.WithTable(t))
	}
	if ns, ok := o.Take("namespace"); ok {
		opts = append(opts, mysqllease.WithNamespace(ns))
	}
	migrate := true
	if v, ok := o.Take("migrate"); ok {
		b, err := parseBool("migrate", v)
		if err != nil {
			return nil, nil, err
		}
		migrate = b
	}
	cfg, err := MySQLConfig(u)
	if err != nil {
		return nil, nil, lease.Invalid("store", "%v", err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, lease.Invalid("store", "%v", err)
	}
	db := sql.OpenDB(conn)
	s, err := mysqllease.New(db, opts...)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	if err = db.PingContext(ctx); err != nil {
		err = fmt.Errorf("connect: %w", err)
	} else if migrate {
		err = s.Migrate(ctx)
	} else if _, err = s.Inspect(ctx, "leasekit-migrate-check"); err != nil {
		err = fmt.Errorf("table missing and migrate=false? drop migrate=false to create it, or call mysqllease's Store.Migrate: %w", err)
	}
	if err != nil {
		_ = closeBoth(s, db.Close)
		return nil, nil, err
	}
	return s, db.Close, nil
}

// MySQLConfig turns a mysql:// URL (without leasekit's options) into the
// driver's configuration, with Open's defaults (see openMySQL). Errors
// never contain the password.
func MySQLConfig(u *url.URL) (*mysql.Config, error) {
	q := u.Query()
	if !q.Has("interpolateParams") {
		q.Set("interpolateParams", "true")
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); !q.Has("tls") && !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
		q.Set("tls", DefaultMySQLTLS)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(host, "3306")
	}
	cfg, err := mysql.ParseDSN("tcp(" + addr + ")/" + url.PathEscape(strings.TrimPrefix(u.Path, "/")) + "?" + q.Encode())
	if err != nil {
		return nil, err
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	return cfg, nil
}
