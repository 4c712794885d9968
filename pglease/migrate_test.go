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
