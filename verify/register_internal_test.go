// The pair registers of the transfer workload: a stale fence on either key
// refuses the whole operation.

package verify

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leasekit/lease/leasetest"
)

func TestPairRegisterFile(t *testing.T) {
	testPairRegister(t, "file:"+filepath.Join(t.TempDir(), "register"))
}

func TestPairRegisterPostgres(t *testing.T) {
	dsn := leasetest.Env(t, "LEASE_TEST_POSTGRES_DSN")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec, cleanup, err := PostgresRegister(ctx, dsn, "leasekit_verify_register", "pair-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cleanup(context.Background()) })
	testPairRegister(t, spec)
}

func testPairRegister(t *testing.T, spec string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := openPairRegister(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	step := func(what string, ok bool, err error, want bool) {
		t.Helper()
		if err != nil || ok != want {
			t.Fatalf("%s: ok %v, %v; want ok %v", what, ok, err, want)
		}
	}
	va, vb, ok, err := r.Read(ctx, 5, 7)
	step("read (5, 7)", ok, err, true)
	if va != transferInitial || vb != transferInitial {
		t.Fatalf("initial values %d, %d; want %d each", va, vb, transferInitial)
	}
	ok, err = r.Write(ctx, 5, 7, va-3, vb+3)
	step("write (5, 7)", ok, err, true)
	ok, err = r.Write(ctx, 4, 8, 0, 0) // a's fence is stale
	step("write (4, 8)", ok, err, false)
	ok, err = r.Write(ctx, 6, 6, 0, 0) // b's fence is stale
	step("write (6, 6)", ok, err, false)
	_, _, ok, err = r.Read(ctx, 5, 6)
	step("read (5, 6)", ok, err, false)
	va, vb, ok, err = r.Read(ctx, 5, 7)
	step("read (5, 7) again", ok, err, true)
	if va != transferInitial-3 || vb != transferInitial+3 {
		t.Fatalf("values %d, %d after one transfer of 3 and two refused; want %d, %d", va, vb, transferInitial-3, transferInitial+3)
	}
	if pa, pb, err := r.Peek(ctx); err != nil || pa != va || pb != vb {
		t.Fatalf("Peek: %d, %d, %v; want %d, %d", pa, pb, err, va, vb)
	}
}
