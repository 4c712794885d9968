package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"log"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence/sqlfence"
)

// Rows of accounts keep their fence in lock_version (BIGINT NOT NULL,
// inserted as 0). A write carries the lease's fence.
func ExampleTable_Update() {
	var (
		ctx context.Context
		db  *sql.DB
		l   *lease.Lease
	)
	accounts, err := sqlfence.NewTable(sqlfence.Postgres, "accounts", "id", "lock_version")
	if err != nil {
		log.Fatal(err)
	}
	err = accounts.Update(ctx, db, 42, l.Fence(), sqlfence.Set{"balance": 100})
	if errors.Is(err, lease.ErrStaleFence) {
		log.Print("a newer holder has written; stop")
	}
}

// Several writes fenced together: Tx claims the row first.
func ExampleTable_Tx() {
	var (
		ctx context.Context
		db  *sql.DB
		l   *lease.Lease
	)
	accounts, err := sqlfence.NewTable(sqlfence.MySQL, "accounts", "id", "lock_version")
	if err != nil {
		log.Fatal(err)
	}
	err = accounts.Tx(ctx, db, 42, l.Fence(), func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 42"); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO ledger (account, amount) VALUES (42, -10)")
		return err
	})
	if err != nil {
		log.Print(err)
	}
}
