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
// of dsn and fresh rows (id for the register and read-write workloads, id:a
// and id:b for the transfer workload), and returns the register spec for
// Config.Register and a function that deletes the rows.
func PostgresRegister(ctx context.Context, dsn, table, id string) (spec string, cleanup func(context.Context) error, err error) {
	pool, err := newPool(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	defer pool.Close()
	t := pgx.Identifier{table}.Sanitize()
	// Two runs creating the table at once collide in the catalog (a unique
	// violation) despite IF NOT EXISTS: one statement string, one implicit
	// transaction, under a transaction lock of the harness's own.
	if _, err := pool.Exec(ctx, "SELECT pg_advisory_xact_lock(7163042195); CREATE TABLE IF NOT EXISTS "+t+" (id text PRIMARY KEY, lock_version bigint NOT NULL, value bigint NOT NULL)"); err != nil {
		return "", nil, fmt.Errorf("create the register table: %w", err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+t+" (id, lock_version, value) VALUES ($1, 0, 0), ($2, 0, $4), ($3, 0, $4) ON CONFLICT (id) DO UPDATE SET lock_version = 0, value = excluded.value",
		id, id+":a", id+":b", transferInitial); err != nil {
		return "", nil, fmt.Errorf("create the register rows: %w", err)
	}
	cleanup = func(ctx context.Context) error {
		p, err := newPool(ctx, dsn)
		if err != nil {
			return err
		}
		defer p.Close()
		_, err = p.Exec(ctx, "DELETE FROM "+t+" WHERE id IN ($1, $2, $3)", id, id+":a", id+":b")
		return err
	}
	return dsn + "#" + table + "/" + id, cleanup, nil
}

// pairRegister is two fenced registers, a and b, read and written together:
// an operation is accepted iff fa is at least the largest fence a accepted
// and fb at least b's, atomically and as a whole (both are then recorded),
// and refused whole otherwise.
type pairRegister interface {
	Read(ctx context.Context, fa, fb uint64) (va, vb int64, ok bool, err error)
	Write(ctx context.Context, fa, fb uint64, va, vb int64) (ok bool, err error)
	// Peek returns both values without a fence (the harness's final check).
	Peek(ctx context.Context) (va, vb int64, err error)
	Close() error
}

// openPairRegister opens spec as openRegister does: a file holds both
// registers; a PostgreSQL spec "#table/id" names the rows id:a and id:b
// (made by PostgresRegister).
func openPairRegister(ctx context.Context, spec string) (pairRegister, error) {
	if p, ok := strings.CutPrefix(spec, "file:"); ok {
		return &filePair{path: p}, nil
	}
	if p, ok := strings.CutPrefix(spec, "unfenced:"); ok {
		return &filePair{path: p, unfenced: true}, nil
	}
	dsn, row, _ := strings.Cut(spec, "#")
	pool, err := newPool(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	table, id, _ := strings.Cut(row, "/")
	return &pgPair{pool: pool, table: pgx.Identifier{table}.Sanitize(), a: id + ":a", b: id + ":b"}, nil
}

// filePair keeps both registers in one file, two fixed-width lines "fence
// value\n" (a's, then b's), read-modify-written under an exclusive flock
// with one pwrite: a writer killed at any instant leaves both old records
// or both new ones. Before the first write both values are transferInitial.
type filePair struct {
	path     string
	unfenced bool
}

const pairLine = 42 // "%020d %020d\n"

func (r *filePair) op(fa, fb uint64, write bool, va, vb int64) (int64, int64, bool, error) {
	f, err := os.OpenFile(r.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, 0, false, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return 0, 0, false, err
	}
	fences, vals, err := r.load(f)
	if err != nil {
		return 0, 0, false, err
	}
	if (fa < fences[0] || fb < fences[1]) && !r.unfenced {
		return vals[0], vals[1], false, nil
	}
	if write {
		vals = [2]int64{va, vb}
	}
	rec := fmt.Sprintf("%020d %020d\n%020d %020d\n", fa, vals[0], fb, vals[1])
	if _, err := f.WriteAt([]byte(rec), 0); err != nil {
		return 0, 0, false, err
	}
	return vals[0], vals[1], true, nil
}

// load parses the file (locked by the caller).
func (r *filePair) load(f *os.File) (fences [2]uint64, vals [2]int64, err error) {
	vals = [2]int64{transferInitial, transferInitial}
	buf := make([]byte, 2*pairLine)
	n, _ := f.ReadAt(buf, 0)
	if n == 0 {
		return fences, vals, nil
	}
	lines := strings.Split(strings.TrimSpace(string(buf[:n])), "\n")
	if len(lines) != 2 {
		return fences, vals, fmt.Errorf("register file %s: %d lines, want 2", r.path, len(lines))
	}
	for i, l := range lines {
		a, b, _ := strings.Cut(l, " ")
		if fences[i], err = strconv.ParseUint(a, 10, 64); err != nil {
			return fences, vals, fmt.Errorf("register file %s: %w", r.path, err)
		}
		if vals[i], err = strconv.ParseInt(b, 10, 64); err != nil {
			return fences, vals, fmt.Errorf("register file %s: %w", r.path, err)
		}
	}
	return fences, vals, nil
}

func (r *filePair) Read(_ context.Context, fa, fb uint64) (int64, int64, bool, error) {
	return r.op(fa, fb, false, 0, 0)
}

func (r *filePair) Write(_ context.Context, fa, fb uint64, va, vb int64) (bool, error) {
	_, _, ok, err := r.op(fa, fb, true, va, vb)
	return ok, err
}

func (r *filePair) Peek(context.Context) (int64, int64, error) {
	f, err := os.OpenFile(r.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return 0, 0, err
	}
	_, vals, err := r.load(f)
	return vals[0], vals[1], err
}

func (r *filePair) Close() error { return nil }

// pgPair is the lock_version pattern on two rows, in one transaction that
// locks both (in id order) before it checks and updates them.
type pgPair struct {
	pool  *pgxpool.Pool
	table string
	a, b  string
}

func (r *pgPair) op(ctx context.Context, fa, fb uint64, write bool, va, vb int64) (int64, int64, bool, error) {
	var ok bool
	var cur [2]int64
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT id, lock_version, value FROM "+r.table+" WHERE id IN ($1, $2) ORDER BY id FOR UPDATE", r.a, r.b)
		if err != nil {
			return err
		}
		var fences [2]int64
		n := 0
		for rows.Next() {
			var id string
			var f, v int64
			if err := rows.Scan(&id, &f, &v); err != nil {
				return err
			}
			i := 0
			if id == r.b {
				i = 1
			}
			fences[i], cur[i] = f, v
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n != 2 {
			return fmt.Errorf("register rows %s, %s: %d found, want 2", r.a, r.b, n)
		}
		if int64(fa) < fences[0] || int64(fb) < fences[1] {
			return nil
		}
		if write {
			cur = [2]int64{va, vb}
		}
		_, err = tx.Exec(ctx, "UPDATE "+r.table+" SET lock_version = CASE WHEN id = $1 THEN $3::bigint ELSE $4::bigint END, value = CASE WHEN id = $1 THEN $5::bigint ELSE $6::bigint END WHERE id IN ($1, $2)",
			r.a, r.b, int64(fa), int64(fb), cur[0], cur[1])
		ok = err == nil
		return err
	})
	if err != nil {
		return 0, 0, false, err
	}
	return cur[0], cur[1], ok, nil
}

func (r *pgPair) Read(ctx context.Context, fa, fb uint64) (int64, int64, bool, error) {
	return r.op(ctx, fa, fb, false, 0, 0)
}

func (r *pgPair) Write(ctx context.Context, fa, fb uint64, va, vb int64) (bool, error) {
	_, _, ok, err := r.op(ctx, fa, fb, true, va, vb)
	return ok, err
}

func (r *pgPair) Peek(ctx context.Context) (int64, int64, error) {
	var va, vb int64
	err := r.pool.QueryRow(ctx, "SELECT (SELECT value FROM "+r.table+" WHERE id = $1), (SELECT value FROM "+r.table+" WHERE id = $2)", r.a, r.b).Scan(&va, &vb)
	return va, vb, err
}

func (r *pgPair) Close() error { r.pool.Close(); return nil }
