// The postgres:// and postgresql:// schemes: pglease over a pgx pool.

package leaseurl

import (
	"context"
	"net/url"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/pglease"
)

func init() {
	Register("postgres", openPostgres)
	Register("postgresql", openPostgres)
}

// openPostgres parses the URL with pgxpool.ParseConfig (so sslmode and every
// libpq option work) after taking leasekit's options out of it:
// mode=table|advisory, table=NAME, namespace=NS and migrate=true|false
// (default true: Open runs the idempotent CREATE TABLE IF NOT EXISTS).
func openPostgres(ctx context.Context, u *url.URL, o *Options) (lease.Store, func() error, error) {
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
	migrate := true
	if v, ok := o.Take("migrate"); ok {
		b, err := parseBool("migrate", v)
		if err != nil {
			return nil, nil, err
		}
		migrate = b
	}
	cfg, err := pgxpool.ParseConfig(u.String())
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
	if migrate {
		if err := s.Migrate(ctx); err != nil {
			_ = closeBoth(s, closePool)
			return nil, nil, err
		}
	}
	return s, closePool, nil
}
