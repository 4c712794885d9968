// Package sqlfence makes writes to rows of a database/sql table conditional
// on a lease's fence: the lock_version pattern. Each row keeps the largest
// fence it accepted in a BIGINT column; a write with a smaller fence is
// refused with a *lease.StaleFenceError (it matches lease.ErrStaleFence and
// lease.ErrNotHeld), a write with an equal or larger one lands and records it.
//
//	accounts, err := sqlfence.NewTable(sqlfence.Postgres, "accounts", "id", "lock_version")
//	err = accounts.Update(ctx, db, 42, l.Fence(), sqlfence.Set{"balance": 100})
//	err = accounts.Tx(ctx, db, 42, l.Fence(), func(ctx context.Context, tx *sql.Tx) error {
//		... // writes that the row's fence guards
//	})
//
// Update is one statement; Tx (or Claim, in a transaction of your own) locks
// the row and raises its fence first, so every write of the transaction is
// fenced. Rows must exist (insert them with fence 0); fences above
// math.MaxInt64 do not fit a BIGINT and are refused as invalid. Why this is
// atomic: docs/design.md, "Fenced writes".
package sqlfence
