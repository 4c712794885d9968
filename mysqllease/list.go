// Listing keys and breaking leases (driver.Lister, driver.Breaker), in both
// modes; a Break's tombstones live in the row's broken column, a JSON
// object {token: expiry in µs since the epoch}.

package mysqllease

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// entry describes the key of r as List and Break report it.
func (r *row) entry(key string) driver.Entry {
	e := driver.Entry{Key: key}
	if r.live {
		e.Holders = []driver.Holder{{Token: r.token.String, Holder: r.holder.String, Fence: r.fence,
			Remaining: time.Duration(r.us) * time.Microsecond}}
	}
	for token := range r.tombstones() {
		e.Broken = append(e.Broken, token)
	}
	return e
}

// tombstones returns the row's live tombstones.
func (r *row) tombstones() map[string]int64 {
	all := make(map[string]int64)
	_ = json.Unmarshal([]byte(r.broken.String), &all) // a bad value is no tombstone
	for token, until := range all {
		if until <= r.now {
			delete(all, token)
		}
	}
	return all
}

// List returns the live keys among up to limit keys starting with prefix,
// in byte order, after cursor (the last key scanned), in one statement.
func (b *base) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	limit = max(limit, 1)
	up, bounded := above(prefix)
	rows, err := b.db.QueryContext(ctx, b.pageSQL, b.ns, cursor, prefix, !bounded, up, limit)
	if err != nil {
		return nil, "", opErr("list", prefix, true, err)
	}
	defer func() { _ = rows.Close() }()
	var page []driver.Entry
	var key string
	for n := 1; rows.Next(); n++ {
		var r row
		if err := rows.Scan(append([]any{&key}, r.dest()...)...); err != nil {
			return nil, "", opErr("list", prefix, true, err)
		} else if err := r.check("list", key); err != nil {
			return nil, "", err
		}
		if e := r.entry(key); len(e.Holders)+len(e.Broken) > 0 {
			page = append(page, e)
		}
		if n == limit { // the page's LIMIT: more may follow
			return page, key, nil
		}
	}
	return page, "", opErr("list", prefix, true, rows.Err())
}

// above returns the least byte string above every string that starts with
// prefix, if there is one.
func above(prefix string) (string, bool) {
	p := []byte(prefix)
	for len(p) > 0 && p[len(p)-1] == 0xff {
		p = p[:len(p)-1]
	}
	if len(p) == 0 {
		return "", false
	}
	p[len(p)-1]++
	return string(p), true
}

// breakRow frees key whoever holds it, in one transaction that locks its
// row, adds a tombstone for its holder until the hold would have expired,
// and clears it. It returns the key as it was, and its row.
func (b *base) breakRow(ctx context.Context, key string) (driver.Entry, row, error) {
	var r row
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return driver.Entry{}, r, opErr("break", key, true, err)
	}
	defer func() { _ = tx.Rollback() }()
	err = tx.QueryRowContext(ctx, b.inspectSQL+" FOR UPDATE", b.ns, key).Scan(r.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Entry{Key: key}, r, nil
	} else if err != nil {
		return driver.Entry{}, r, opErr("break", key, true, err)
	} else if err := r.check("break", key); err != nil {
		return driver.Entry{}, r, err
	}
	e := r.entry(key)
	if !r.live {
		return e, r, nil
	}
	tombs := r.tombstones()
	tombs[r.token.String] = r.now + max(r.us, 1)
	broken, _ := json.Marshal(tombs)
	if _, err = tx.ExecContext(ctx, b.breakSQL, string(broken), b.ns, key); err == nil {
		err = tx.Commit()
	}
	return e, r, opErr("break", key, true, err)
}

// Break frees key whoever holds it (see breakRow).
func (s *TableStore) Break(ctx context.Context, key string) (driver.Entry, error) {
	e, _, err := s.breakRow(ctx, key)
	return e, err
}

// markBroken turns err, op's on r, into one matching lease.ErrBroken if it
// matches lease.ErrNotHeld and r.Token has a live tombstone. If it cannot
// tell, a break reads as a loss: never as a lease still held.
func (b *base) markBroken(ctx context.Context, op string, r driver.Request, err error) error {
	if !errors.Is(err, lease.ErrNotHeld) || op != "renew" {
		return err
	}
	var t row
	if b.db.QueryRowContext(ctx, b.inspectSQL, b.ns, r.Key).Scan(t.dest()...) == nil {
		if _, ok := t.tombstones()[r.Token]; ok {
			return fmt.Errorf("mysqllease: %s %q: %w", op, r.Key, lease.ErrBroken)
		}
	}
	return err
}
