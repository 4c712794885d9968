// The postgres:// and postgresql:// schemes: pglease over a pgx pool.

package leaseurl

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/pglease"
)

func init() {
	Register("postgres", openPostgres)
	Register("postgresql", openPostgres)
}

// openPostgres parses the URL with pgxpool.ParseConfig (so sslmode and every
// libpq option work) after taking leasekit's options out of it:
// mode=table|advisory, table=NAME, namespace=NS and migrate=true|false
// (default true: Open runs the idempotent CREATE TABLE IF NOT EXISTS; with
// false it checks that the tables exist). Without an sslmode, a host that is
// not loopback gets sslmode=verify-full (pgConfig). It connects once, so
// that an unreachable server fails Open.
func openPostgres(ctx context.Context, u *url.URL, o *Options) (driver.Store, func() error, error) {
	var opts []pglease.Option
	if m, ok := o.Take("mode"); ok {
		switch m {
		case "table", "":
			opts = append(opts, pglease.WithMode(pglease.ModeTable))
		case "advisory":
			opts = append(opts, pglease.WithMode(pglease.ModeAdvisory))
		default:
			return nil, nil, lease.Invalid("mode", "%q (want table or advisory)", m)
		}
	}
	if t, ok := o.Take("table"); ok {
		opts = append(opts, pglease.WithTable(t))
	}
	if ns, ok := o.Take("namespace"); ok {
		opts = append(opts, pglease.WithNamespace(ns))
	}
	if n, ok, err := o.maxWaiters(); err != nil {
		return nil, nil, err
	} else if ok {
		opts = append(opts, pglease.WithMaxWaiters(n))
	}
	migrate := true
	if v, ok := o.Take("migrate"); ok {
		b, err := parseBool("migrate", v)
		if err != nil {
			return nil, nil, err
		}
		migrate = b
	}
	cfg, verifyByDefault, err := pgConfig(u)
	if err != nil {
		return nil, nil, lease.Invalid("store", "%v", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	closePool := func() error { pool.Close(); return nil }
	s, err := pglease.New(pool, opts...)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	// The pool connects lazily: connect here, so that an unreachable server
	// is reported as such rather than as a failed migration or lookup.
	if err := pool.Ping(ctx); err != nil {
		_ = closeBoth(s, closePool)
		if verifyByDefault {
			return nil, nil, fmt.Errorf("connect with sslmode=verify-full (the default for a host that is not loopback: "+
				"add sslrootcert=CA-FILE, or set sslmode yourself): %w", err)
		}
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	if migrate {
		err = s.Migrate(ctx)
	} else {
		err = tablesExist(ctx, pool, s)
	}
	if err != nil {
		_ = closeBoth(s, closePool)
		return nil, nil, err
	}
	return s, closePool, nil
}

// DefaultPostgresSSLMode is the sslmode Open gives a postgres:// URL that
// reaches a host that is not loopback and chooses no sslmode: the server's
// certificate must be signed by a trusted CA (sslrootcert, else the
// system's roots) and name the host. pgx's own default, prefer, accepts any
// certificate and falls back to plain text.
const DefaultPostgresSSLMode = "verify-full"

// PostgresConfig parses a postgres:// or postgresql:// URL (without
// leasekit's options) into a pgxpool configuration with Open's TLS
// default: sslmode=verify-full for a host that is not loopback when
// neither the URL, $PGSSLMODE nor a service chooses an sslmode (see the
// package documentation); verifyByDefault reports that it was added. Other
// connection strings (keyword=value) are parsed by pgxpool.ParseConfig as
// they are. Errors never contain the password.
func PostgresConfig(dsn string) (cfg *pgxpool.Config, verifyByDefault bool, err error) {
	if u, perr := url.Parse(dsn); perr == nil && (lowerScheme(u) == "postgres" || lowerScheme(u) == "postgresql") {
		cfg, verifyByDefault, err = pgConfig(u)
	} else {
		cfg, err = pgxpool.ParseConfig(dsn)
	}
	if err != nil {
		return nil, false, scrub(err, dsn)
	}
	return cfg, verifyByDefault, nil
}

// pgConfig parses u with pgxpool.ParseConfig. When u chooses no sslmode
// itself (no sslmode or ssl parameter, no service, neither $PGSSLMODE nor
// $PGSERVICE) and reaches any host over TCP that is not loopback, it parses
// u again with sslmode=verify-full added, and reports that it did. Unix
// sockets, localhost and loopback addresses keep pgx's default (prefer).
func pgConfig(u *url.URL) (cfg *pgxpool.Config, verifyByDefault bool, err error) {
	cfg, err = pgxpool.ParseConfig(u.String())
	if err != nil || sslModeChosen(u) || !remoteHost(&cfg.ConnConfig.Config) {
		return cfg, false, err
	}
	v := *u
	v.RawQuery = "sslmode=" + DefaultPostgresSSLMode
	if u.RawQuery != "" {
		v.RawQuery = u.RawQuery + "&" + v.RawQuery
	}
	cfg, err = pgxpool.ParseConfig(v.String())
	return cfg, err == nil, err
}

// sslModeChosen reports whether the user chose the sslmode of u: in the URL
// (sslmode, or its alias ssl=true), through a service file (whose settings
// are used as written), or in the environment.
func sslModeChosen(u *url.URL) bool {
	q, _ := url.ParseQuery(u.RawQuery)
	for _, k := range []string{"sslmode", "ssl", "service"} {
		if _, ok := q[k]; ok {
			return true
		}
	}
	return os.Getenv("PGSSLMODE") != "" || os.Getenv("PGSERVICE") != ""
}

// remoteHost reports whether c reaches any host over TCP that is not
// localhost or a loopback address (a name that merely resolves to one
// counts as remote).
func remoteHost(c *pgconn.Config) bool {
	hosts := []string{c.Host}
	for _, f := range c.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if network, _ := pgconn.NetworkAddress(h, 0); network == "unix" || strings.EqualFold(h, "localhost") {
			continue
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
			continue
		}
		return true
	}
	return false
}

// tablesExist checks, with migrate=false, that the tables Migrate would have
// created exist, and otherwise says how to create them: the store's first
// operation would only report "relation does not exist".
func tablesExist(ctx context.Context, pool *pgxpool.Pool, s *pglease.Store) error {
	var table, queue bool
	err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL", s.Table(), s.QueueTable()).Scan(&table, &queue)
	switch {
	case err != nil:
		return fmt.Errorf("look for table %s: %w", s.Table(), err)
	case !table:
		return fmt.Errorf("table %s does not exist and migrate=false: drop migrate=false to create it, or call pglease's Store.Migrate", s.Table())
	case !queue:
		return fmt.Errorf("table %s (created by an older leasekit) lacks %s and migrate=false: drop migrate=false to add it, or call pglease's Store.Migrate", s.Table(), s.QueueTable())
	}
	return nil
}
