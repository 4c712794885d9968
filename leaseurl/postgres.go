// The postgres:// and postgresql:// schemes: pglease over a pgx pool.

package leaseurl

import (
	"context"
	"fmt"
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
// (default true: Open runs the idempotent CREATE TABLE IF NOT EXISTS; with
// false it checks that the tables exist). It connects once, so that an
// unreachable server fails Open.
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
	// The pool connects lazily: connect here, so that an unreachable server
	// is reported as such rather than as a failed migration or lookup.
	if err := pool.Ping(ctx); err != nil {
		_ = closeBoth(s, closePool)
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
