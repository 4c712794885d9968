// The cap of each key's queue of waiters (WithMaxWaiters): queued attempts
// of a key take a transaction-level advisory lock first, in the same round
// trip, so that the acquire statement that counts the queue sees every entry
// an earlier queued attempt committed.

package pglease

import (
	"context"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
)

// queueLockSQL takes the queue lock of a key ($1, see queueLockKey) until
// the end of the (implicit) transaction. It is the one-bigint form of the
// advisory locks (objsubid 1): it never meets advisory mode's session locks
// (the two-int form, objsubid 2).
const queueLockSQL = `SELECT pg_advisory_xact_lock($1)`

// queueLockKey is the key of the queue lock of key: a hash of the table,
// the namespace and key.
func (s *Store) queueLockKey(key string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("leasekit queue\x00" + s.table + "\x00" + s.ns + "\x00" + key))
	return int64(h.Sum64())
}

// querier is a pgx pool or connection.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// queryQueued runs the acquire statement sql of r on q. With r.Queue it
// first takes r.Key's queue lock in the same batch, one round trip and one
// implicit transaction: queued attempts of a key then run one after the
// other, and each statement's snapshot, taken once the lock is granted,
// counts every entry the previous ones queued, so the cap is exact. The
// lock is held only for the statement: unqueued attempts, renewals and
// releases never take it. done ends the batch; call it after closing rows.
func (s *Store) queryQueued(ctx context.Context, q querier, r lease.Request, sql string, args ...any) (rows pgx.Rows, done func() error, err error) {
	if !r.Queue {
		rows, err := q.Query(ctx, sql, args...)
		return rows, func() error { return nil }, err
	}
	b := &pgx.Batch{}
	b.Queue(queueLockSQL, s.queueLockKey(r.Key))
	b.Queue(sql, args...)
	br := q.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, nil, err
	}
	rows, err = br.Query()
	if err != nil {
		_ = br.Close()
		return nil, nil, err
	}
	return rows, br.Close, nil
}
