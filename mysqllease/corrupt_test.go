package mysqllease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/mysqllease"
)

// TestCorruptRows: lease rows our statements never write are ErrCorrupt,
// never a grant, in both modes; deleting the row heals the key.
func TestCorruptRows(t *testing.T) {
	db := migratedDB(t)
	const live = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) + 3600000000"
	for name, mode := range map[string]mysqllease.Mode{"table": mysqllease.ModeTable, "getlock": mysqllease.ModeGetLock} {
		t.Run(name, func(t *testing.T) {
			ns := namespace(t)
			s := storeNS(t, db, mode, ns)
			ctx := testCtx(t, time.Minute)
			tok := req("", "", 0).Token
			conn := "NULL" // a GET_LOCK row names its holder's connection: one that holds no lock
			if mode == mysqllease.ModeGetLock {
				conn = "12345"
			}
			insert := func(key, token, fence, expires, conn string) {
				t.Helper()
				_, err := db.ExecContext(ctx, "INSERT INTO leasekit_leases (ns, k, holder, token, fence, expires_us, conn) VALUES (?, ?, 'h', "+
					token+", "+fence+", "+expires+", "+conn+")", ns, key, tok)
				if err != nil {
					t.Fatal(err)
				}
			}
			cases := []struct{ what, token, fence, expires, conn string }{
				{"a fence of 0", "?", "0", live, conn},
				{"a free row with a fence of 0", "NULL + length(?)", "0", "0", "NULL"},
				{"a fence past MaxInt64", "?", "9223372036854775808", live, conn},
				{"the largest fence on a free row", "NULL + length(?)", "18446744073709551615", "0", "NULL"},
				{"an empty token", "left(?, 0)", "5", live, conn},
				{"an expiry before the epoch", "?", "5", "-5", conn},
				{"the least expiry", "?", "5", "-9223372036854775808", conn},
				{"an expiry past the longest TTL", "?", "5", "9223372036854775807", conn},
			}
			for _, tc := range cases {
				key := "corrupt-" + randHex()
				insert(key, tc.token, tc.fence, tc.expires, tc.conn)
				leasetest.WantCorrupt(t, s, key, tok, tc.what)
			}
			// The last fence: the next grant would pass MaxInt64.
			key := "full-" + randHex()
			insert(key, "NULL + length(?)", "9223372036854775807", "0", "NULL")
			if g, err := s.Acquire(ctx, req(key, "h", 5*time.Second)); !errors.Is(err, lease.ErrCorrupt) {
				t.Errorf("the last fence: Acquire = %+v, %v; want ErrCorrupt", g, err)
			}
			if _, err := db.ExecContext(ctx, "DELETE FROM leasekit_leases WHERE ns = ? AND k = ?", ns, key); err != nil {
				t.Fatal(err)
			}
			r := req(key, "h", 5*time.Second)
			if g, err := s.Acquire(ctx, r); err != nil || g.Fence != 1 {
				t.Errorf("the row deleted: Acquire = %+v, %v; want fence 1", g, err)
			}
			_ = s.Release(ctx, r)
			if mode == mysqllease.ModeGetLock {
				tableRowIsFree(t, s, insert)
			}
		})
	}
}

// tableRowIsFree: in GET_LOCK mode a table mode's row, a token without a
// connection, is free (no connection holds its lock), for Inspect as for
// Acquire, which takes the next fence. It once read as held.
func tableRowIsFree(t *testing.T, s mysqllease.Store, insert func(key, token, fence, expires, conn string)) {
	ctx := testCtx(t, time.Minute)
	key := "table-row-" + randHex()
	insert(key, "?", "5", "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) + 3600000000", "NULL")
	if info, err := s.Inspect(ctx, key); err != nil || info.Held || info.Fence != 5 {
		t.Errorf("Inspect = %+v, %v; want free, fence 5", info, err)
	}
	r := req(key, "h", 5*time.Second)
	if g, err := s.Acquire(ctx, r); err != nil || g.Fence != 6 {
		t.Errorf("Acquire = %+v, %v; want fence 6", g, err)
	}
	_ = s.Release(ctx, r)
}
