package pglease_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasekit/lease/pglease"
)

// TestMigrateBesideOpenTransaction: Migrate on a migrated table does not
// wait for a transaction that wrote to the queue table and is still open (a
// slow client, or a test holding an entry uncommitted). CREATE INDEX IF NOT
// EXISTS would: it locks the table before it looks for the index, and every
// lease operation of the table then queues behind it.
func TestMigrateBesideOpenTransaction(t *testing.T) {
	pool := sharedPool(t)
	ctx := testCtx(t, 30*time.Second)
	table := pglease.WithTable("lk_migrate_open_tx_" + randHex(4))
	migrate(t, pool, table)
	s := newStore(t, pool, pglease.ModeTable, table)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+s.Table()+", "+s.QueueTable())
	})
	insertEntryUncommitted(t, ctx, pool, s, req("k", "X", 10*time.Second))
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.Migrate(mctx); err != nil {
		t.Fatalf("Migrate beside an open transaction on the queue table: %v", err)
	}
}

// TestMigrateFillfactor: Migrate gives a lease table made before the
// fillfactor (whose renewals could not be heap-only updates) fillfactor 50,
// and keeps one the operator chose; a migrated table still works.
func TestMigrateFillfactor(t *testing.T) {
	pool := sharedPool(t)
	ctx := testCtx(t, 30*time.Second)
	for _, tc := range []struct{ set, want string }{{"", "fillfactor=50"}, {"fillfactor=80", "fillfactor=80"}} {
		table := pglease.WithTable("lk_migrate_ff_" + randHex(4))
		migrate(t, pool, table)
		s := newStore(t, pool, pglease.ModeTable, table)
		t.Cleanup(func() {
			_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+s.Table()+", "+s.QueueTable())
		})
		reset := "ALTER TABLE " + s.Table() + " RESET (fillfactor)"
		if tc.set != "" {
			reset = "ALTER TABLE " + s.Table() + " SET (" + tc.set + ")"
		}
		if _, err := pool.Exec(ctx, reset); err != nil {
			t.Fatalf("%s: %v", reset, err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		var opts []string
		if err := pool.QueryRow(ctx, "SELECT COALESCE(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass", s.Table()).Scan(&opts); err != nil {
			t.Fatalf("reloptions: %v", err)
		}
		if len(opts) != 1 || opts[0] != tc.want {
			t.Errorf("after %q and Migrate: reloptions %q, want [%s]", reset, opts, tc.want)
		}
		if _, err := s.Acquire(ctx, req("k", "T", 10*time.Second)); err != nil {
			t.Errorf("Acquire on the migrated table: %v", err)
		}
	}
}
