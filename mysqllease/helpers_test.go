// Shared helpers of the mysqllease tests: the database, migrated stores and
// namespaces.

package mysqllease_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/mysqllease"
)

// testCtx returns a context that ends with the test or after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// openDB opens LEASE_TEST_MYSQL_DSN (a go-sql-driver DSN such as
// root@tcp(127.0.0.1:3306)/test; the test is skipped when it is unset, or
// fails under LEASE_TEST_REQUIRE_ALL=1), closed when the test ends.
func openDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn(t))
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	db.SetMaxIdleConns(16)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// dsn returns LEASE_TEST_MYSQL_DSN.
func dsn(t testing.TB) string {
	t.Helper()
	return leasetest.Env(t, "LEASE_TEST_MYSQL_DSN")
}

// migratedDB opens the test database and migrates the default lease table.
func migratedDB(t testing.TB, opts ...mysqllease.Option) *sql.DB {
	t.Helper()
	db := openDB(t)
	s, err := mysqllease.New(db, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Migrate(testCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return db
}

// newStore returns a store on db in mode under a fresh namespace, closed
// when the test ends.
func newStore(t testing.TB, db *sql.DB, mode mysqllease.Mode, opts ...mysqllease.Option) mysqllease.Store {
	t.Helper()
	return storeNS(t, db, mode, namespace(t), opts...)
}

// storeNS returns a store on db in mode under ns, closed when the test ends.
func storeNS(t testing.TB, db *sql.DB, mode mysqllease.Mode, ns string, opts ...mysqllease.Option) mysqllease.Store {
	t.Helper()
	opts = append([]mysqllease.Option{mysqllease.WithMode(mode), mysqllease.WithNamespace(ns)}, opts...)
	s, err := mysqllease.New(db, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// namespace returns a namespace no other test or run uses.
func namespace(t testing.TB) string { return "mysqllease_test/" + t.Name() + "/" + randHex() }

// randHex returns 8 random hex digits.
func randHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
