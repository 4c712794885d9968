package pglease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/pglease"
)

// TestCorruptRows: lease rows our statements never write are ErrCorrupt,
// never a grant, in both modes.
func TestCorruptRows(t *testing.T) {
	pool := sharedPool(t)
	for _, mode := range []pglease.Mode{pglease.ModeTable, pglease.ModeAdvisory} {
		t.Run(mode.String(), func(t *testing.T) {
			ns := namespace(t)
			s := storeNS(t, pool, mode, ns)
			ctx := testCtx(t, time.Minute)
			tok := token()
			insert := func(key, cols, vals string) {
				t.Helper()
				_, err := pool.Exec(ctx, "INSERT INTO leasekit_leases (ns, key, holder, "+cols+") VALUES ($1, $2, 'h', "+vals+")",
					ns, key, tok)
				if err != nil {
					t.Fatal(err)
				}
			}
			key := "negative-" + randHex(4)
			insert(key, "token, fence, expires_at, pid", "$3, -5, now() + interval '1 hour', pg_backend_pid()")
			leasetest.WantCorrupt(t, s, key, tok, "a negative fence")
			if mode == pglease.ModeAdvisory { // table mode's exclusive Acquire reads no readers: it replaces them
				key = "readers-" + randHex(4)
				insert(key, "fence, readers", "7 + length($3) * 0, '[1, 2]'")
				leasetest.WantCorrupt(t, s, key, tok, "readers that are no object")
			}
			if mode == pglease.ModeTable {
				tableNULLs(t, s, insert, tok)
			}
			// The last fence: the next grant would overflow.
			key = "full-" + randHex(4)
			insert(key, "fence", "9223372036854775807 + length($3) * 0")
			if g, err := s.Acquire(ctx, req(key, "h", time.Minute)); !errors.Is(err, lease.ErrCorrupt) {
				t.Errorf("the last fence: Acquire = %+v, %v; want ErrCorrupt", g, err)
			}
		})
	}
}

// tableNULLs: table-mode rows with NULLs or readers our statements never
// write (they used to read as expired, or the shared Acquire granted over
// them) are ErrCorrupt for exclusive and shared Acquire alike.
func tableNULLs(t *testing.T, s pglease.Store, insert func(key, cols, vals string), tok string) {
	ctx := testCtx(t, time.Minute)
	live := "now() + interval '1 hour'"
	readers := func(entry string) string { return "'', 5, " + live + ", jsonb_build_object($3::text, " + entry + ")" }
	for _, tc := range []struct{ what, cols, vals string }{
		{"a token without an expiry", "token, fence, expires_at", "$3, 5, NULL"},
		{"readers without an expiry", "token, fence, expires_at, readers", "'', 5, NULL, jsonb_build_object($3::text, jsonb_build_array(1, 'h'))"},
		{"the readers' token with NULL readers", "token, fence, expires_at", "left($3, 0), 5, " + live},
		{"the readers' token with no readers", "token, fence, expires_at, readers", "left($3, 0), 5, " + live + ", '{}'"},
		{"a reader with a NULL expiry", "token, fence, expires_at, readers", readers("jsonb_build_array(NULL, 'h')")},
		{"a reader that is a number", "token, fence, expires_at, readers", readers("'5'::jsonb")},
		{"a reader that is an object", "token, fence, expires_at, readers", readers("'{}'::jsonb")},
		{"a reader whose holder is a number", "token, fence, expires_at, readers", readers("jsonb_build_array(9e15, 7)")},
	} {
		key := "null-" + randHex(4)
		insert(key, tc.cols, tc.vals)
		r := req(key, "h", time.Minute)
		r.Shared = true
		if g, err := s.Acquire(ctx, r); !errors.Is(err, lease.ErrCorrupt) {
			t.Errorf("%s: shared Acquire = %+v, %v; want ErrCorrupt", tc.what, g, err)
		}
		leasetest.WantCorrupt(t, s, key, tok, tc.what)
	}
}
