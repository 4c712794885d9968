// Fenced writes in the lease's own database: a transaction that first checks,
// under a row lock, that the lease is still held.

package pglease

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
)

// LeaseRef identifies a held lease; *lease.Lease implements it.
type LeaseRef interface {
	Key() string
	Token() string
	Fence() uint64
}

// FencedTx runs fn inside a transaction on the store's pool that first
// checks, in that same transaction, that the lease row still names l's token
// and fence and (table mode) has not expired by the server's clock, or
// (advisory mode) that its session still holds the lock. The check locks the
// row FOR SHARE until the transaction ends, so nobody can take the lease over
// before fn's writes commit: a holder that was paused past its TTL has its
// write rejected by PostgreSQL itself, with an error matching
// lease.ErrNotHeld, and fn does not run.
//
// fn's error rolls the transaction back and is returned. Keep fn short: in
// table mode the row lock also makes the holder's own renewal wait for the
// commit, so fn must end well within the renew interval (TTL/3 by default).
func (s *Store) FencedTx(ctx context.Context, l LeaseRef, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if l == nil || fn == nil {
		return fmt.Errorf("pglease: fenced write: %w", lease.Invalid("argument", "nil lease or function"))
	}
	key := l.Key()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pglease: fenced write on %q: %w", key, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var fence int64
	if s.mode == ModeAdvisory {
		err = tx.QueryRow(ctx, s.q.advFence, s.classID, hash32(key), s.ns, key, l.Token()).Scan(&fence)
	} else {
		err = tx.QueryRow(ctx, s.q.tabFence, s.ns, key, l.Token()).Scan(&fence)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pglease: fenced write on %q rejected: %w", key, lease.ErrNotHeld)
	case err != nil:
		return fmt.Errorf("pglease: fenced write on %q: %w", key, err)
	case uint64(fence) != l.Fence():
		return fmt.Errorf("pglease: fenced write on %q rejected: fence %d, lease has %d: %w", key, fence, l.Fence(), lease.ErrNotHeld)
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pglease: fenced write on %q: commit: %w", key, err)
	}
	return nil
}
