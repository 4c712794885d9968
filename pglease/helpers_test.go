// Shared helpers of the pglease tests: pools, migrated stores, namespaces,
// tokens and requests.

package pglease_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/pglease"
)

// testCtx returns a context that ends with the test or after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sharedDSN returns LEASE_TEST_POSTGRES_DSN (the test is skipped when it is
// unset, or fails under LEASE_TEST_REQUIRE_ALL=1).
func sharedDSN(t testing.TB) string {
	t.Helper()
	return leasetest.Env(t, "LEASE_TEST_POSTGRES_DSN")
}

// newPool returns a pool for dsn, closed when the test ends.
func newPool(t testing.TB, dsn string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	cfg.MaxConns = maxConns
	ctx := testCtx(t, 10*time.Second)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgxpool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// sharedPool returns a pool of the shared test server whose default lease
// table is migrated.
func sharedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := newPool(t, sharedDSN(t), 16)
	migrate(t, pool)
	return pool
}

// migrate creates the default lease table.
func migrate(t testing.TB, pool *pgxpool.Pool, opts ...pglease.Option) {
	t.Helper()
	s, err := pglease.New(pool, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Migrate(testCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
}

// newStore returns a store on pool in mode under a fresh namespace, closed
// when the test ends.
func newStore(t testing.TB, pool *pgxpool.Pool, mode pglease.Mode, opts ...pglease.Option) pglease.Store {
	t.Helper()
	return storeNS(t, pool, mode, namespace(t), opts...)
}

func storeNS(t testing.TB, pool *pgxpool.Pool, mode pglease.Mode, ns string, opts ...pglease.Option) pglease.Store {
	t.Helper()
	opts = append([]pglease.Option{pglease.WithMode(mode), pglease.WithNamespace(ns)}, opts...)
	s, err := pglease.New(pool, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// subscribe opens a subscription to s's announcements, closed when the test
// ends.
func subscribe(t testing.TB, ctx context.Context, s pglease.Store) driver.Subscription {
	t.Helper()
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// newClient returns a lease.Client over s, closed when the test ends.
func newClient(t testing.TB, s driver.Store, opts ...lease.Option) *lease.Client {
	t.Helper()
	c, err := lease.New(s, opts...)
	if err != nil {
		t.Fatalf("lease.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// namespace returns a namespace no other test or run uses.
func namespace(t testing.TB) string { return "pglease_test/" + t.Name() + "/" + randHex(4) }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// token returns a fresh lease token (32 hex characters).
func token() string { return randHex(16) }

func req(key, holder string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Token: token(), Holder: holder, TTL: ttl}
}

// modes lists both modes, for table-driven tests.
var modes = []pglease.Mode{pglease.ModeTable, pglease.ModeAdvisory}
