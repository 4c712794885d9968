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
			// The last fence: the next grant would overflow.
			key = "full-" + randHex(4)
			insert(key, "fence", "9223372036854775807 + length($3) * 0")
			if g, err := s.Acquire(ctx, req(key, "h", time.Minute)); !errors.Is(err, lease.ErrCorrupt) {
				t.Errorf("the last fence: Acquire = %+v, %v; want ErrCorrupt", g, err)
			}
		})
	}
}
