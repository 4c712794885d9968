// Command pgmigrate creates leasekit's PostgreSQL tables (pglease.Migrate) in
// the database named by its argument or by LEASE_TEST_POSTGRES_DSN. The test
// script runs it once after starting PostgreSQL.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease/pglease"
)

func main() {
	dsn := os.Getenv("LEASE_TEST_POSTGRES_DSN")
	if len(os.Args) > 1 {
		dsn = os.Args[1]
	}
	if dsn == "" {
		fmt.Fprintln(os.Stderr, "usage: pgmigrate DSN (or set LEASE_TEST_POSTGRES_DSN)")
		os.Exit(2)
	}
	if err := run(dsn); err != nil {
		fmt.Fprintln(os.Stderr, "pgmigrate:", err) // pgx errors do not include the password
		os.Exit(1)
	}
}

func run(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, mode := range []pglease.Mode{pglease.ModeTable, pglease.ModeAdvisory} {
		s, err := pglease.New(pool, pglease.WithMode(mode))
		if err != nil {
			return err
		}
		if err := s.Migrate(ctx); err != nil {
			return err
		}
		fmt.Printf("pgmigrate: %s ready (%s mode)\n", s.Table(), mode)
		_ = s.Close()
	}
	return nil
}
