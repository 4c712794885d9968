// The fenced registers: a PostgreSQL row with lock_version and a file under
// flock. Both accept an operation iff its fence is at least the largest they
// accepted, atomically.

package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"

	"github.com/leasekit/lease/leaseurl"
)

// register is a fenced register: Read and Write succeed (ok) iff fence is at
// least the largest fence the register accepted, which they then record.
type register interface {
	Read(ctx context.Context, fence uint64) (value int64, ok bool, err error)
	Write(ctx context.Context, fence uint64, value int64) (ok bool, err error)
	Close() error
}

// openRegister opens spec: "file:PATH" or a postgres:// DSN with a
// "#table/id" suffix naming the row.
func openRegister(ctx context.Context, spec string) (register, error) {
	if p, ok := strings.CutPrefix(spec, "file:"); ok {
		return &fileRegister{path: p}, nil
	}
	if p, ok := strings.CutPrefix(spec, "unfenced:"); ok {
		return &fileRegister{path: p, unfenced: true}, nil
	}
	dsn, row, _ := strings.Cut(spec, "#")
	pool, err := newPool(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	table, id, _ := strings.Cut(row, "/")
	return &pgRegister{pool: pool, table: pgx.Identifier{table}.Sanitize(), id: id}, nil
}

// newPool opens a pool on dsn with leaseurl's TLS default (sslmode
// verify-full for a host that is not loopback when the URL chooses none).
func newPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, _, err := leaseurl.PostgresConfig(dsn)
	if err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// fileRegister keeps "fence value\n" (fixed width) in a file,
// read-modify-written under an exclusive flock with one pwrite, so a writer
// killed at any instant leaves the old record or the new one, never a torn
// or empty file. An unfenced one accepts every operation: the control run
// that shows what fencing prevents.
type fileRegister struct {
	path     string
	unfenced bool
}

func (r *fileRegister) op(fence uint64, write bool, value int64) (int64, bool, error) {
	f, err := os.OpenFile(r.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return 0, false, err
	}
	buf := make([]byte, 64)
	n, _ := f.ReadAt(buf, 0)
	var cur uint64
	var val int64
	if s := strings.TrimSpace(string(buf[:n])); s != "" {
		a, b, _ := strings.Cut(s, " ")
		if cur, err = strconv.ParseUint(a, 10, 64); err != nil {
			return 0, false, fmt.Errorf("register file %s: %w", r.path, err)
		}
		if val, err = strconv.ParseInt(b, 10, 64); err != nil {
			return 0, false, fmt.Errorf("register file %s: %w", r.path, err)
		}
	}
	if fence < cur && !r.unfenced {
		return val, false, nil
	}
	if write {
		val = value
	}
	rec := fmt.Sprintf("%020d %020d\n", fence, val)
	if _, err := f.WriteAt([]byte(rec), 0); err != nil {
		return 0, false, err
	}
	return val, true, nil
}

func (r *fileRegister) Read(_ context.Context, fence uint64) (int64, bool, error) {
	return r.op(fence, false, 0)
}

func (r *fileRegister) Write(_ context.Context, fence uint64, value int64) (bool, error) {
	_, ok, err := r.op(fence, true, value)
	return ok, err
}

func (r *fileRegister) Close() error { return nil }

// pgRegister is the lock_version pattern on one row.
type pgRegister struct {
	pool  *pgxpool.Pool
	table string
	id    string
}

func (r *pgRegister) Read(ctx context.Context, fence uint64) (int64, bool, error) {
	var v int64
	err := r.pool.QueryRow(ctx, "UPDATE "+r.table+" SET lock_version = $1 WHERE id = $2 AND lock_version <= $1 RETURNING value",
		int64(fence), r.id).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

func (r *pgRegister) Write(ctx context.Context, fence uint64, value int64) (bool, error) {
	tag, err := r.pool.Exec(ctx, "UPDATE "+r.table+" SET lock_version = $1, value = $3 WHERE id = $2 AND lock_version <= $1",
		int64(fence), r.id, value)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

func (r *pgRegister) Close() error { r.pool.Close(); return nil }

// PostgresRegister creates (if needed) the register table in the database
// of dsn and a fresh row, and returns the register spec for Config.Register
// and a function that deletes the row.
func PostgresRegister(ctx context.Context, dsn, table, id string) (spec string, cleanup func(context.Context) error, err error) {
	pool, err := newPool(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	defer pool.Close()
	t := pgx.Identifier{table}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+t+" (id text PRIMARY KEY, lock_version bigint NOT NULL, value bigint NOT NULL)"); err != nil {
		return "", nil, fmt.Errorf("create the register table: %w", err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+t+" (id, lock_version, value) VALUES ($1, 0, 0) ON CONFLICT (id) DO UPDATE SET lock_version = 0, value = 0", id); err != nil {
		return "", nil, fmt.Errorf("create the register row: %w", err)
	}
	cleanup = func(ctx context.Context) error {
		p, err := newPool(ctx, dsn)
		if err != nil {
			return err
		}
		defer p.Close()
		_, err = p.Exec(ctx, "DELETE FROM "+t+" WHERE id = $1", id)
		return err
	}
	return dsn + "#" + table + "/" + id, cleanup, nil
}
