// Store-specific tests: bad input, identifiers and data full of
// SQL-significant characters, the session time zone, GET_LOCK's
// connection-bound leases and breaks, and the driver's tls parameter.

package mysqllease_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/mysqllease"
)

var modes = []mysqllease.Mode{mysqllease.ModeTable, mysqllease.ModeGetLock}

// req is a request for key with a fresh token.
func req(key, holder string, ttl time.Duration) driver.Request {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return driver.Request{Key: key, Token: hex.EncodeToString(b), Holder: holder, TTL: ttl}
}

func TestNewInvalid(t *testing.T) {
	db, _ := sql.Open("mysql", "root@tcp(127.0.0.1:1)/none") // never connects
	defer func() { _ = db.Close() }()
	cases := map[string][]mysqllease.Option{
		"three parts":    {mysqllease.WithTable("a.b.c")},
		"empty":          {mysqllease.WithTable("")},
		"empty part":     {mysqllease.WithTable("db.")},
		"NUL":            {mysqllease.WithTable("a\x00b")},
		"trailing space": {mysqllease.WithTable("a ")},
		"too long":       {mysqllease.WithTable(strings.Repeat("t", 65))},
		"namespace":      {mysqllease.WithNamespace(strings.Repeat("n", 256))},
		"mode":           {mysqllease.WithMode(7)},
	}
	for name, opts := range cases {
		if _, err := mysqllease.New(db, opts...); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%s: New = %v, want lease.ErrInvalid", name, err)
		}
	}
	if _, err := mysqllease.New(nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New(nil) = %v, want lease.ErrInvalid", err)
	}
	if _, err := mysqllease.New(db, mysqllease.WithTable(strings.Repeat("ü", 64))); err != nil {
		t.Errorf("a 64-character table name: %v", err)
	}
}

// TestSQLTexts: a table name, namespace, keys and holders full of
// SQL-significant characters are inert data.
func TestSQLTexts(t *testing.T) {
	db := openDB(t)
	ctx := testCtx(t, 60*time.Second)
	table := "leasekit odd`name'; DROP TABLE leasekit_leases; --"
	texts := []string{`'); DROP TABLE leasekit_leases; --`, `x' OR '1'='1`, `\'; SELECT SLEEP(10); --`, "%", "_", "ключ 🔒", "`"}
	for _, mode := range modes {
		s := newStore(t, db, mode, mysqllease.WithTable(table), mysqllease.WithNamespace(texts[0]+randHex()))
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		for _, text := range texts {
			r := req(text, text, 5*time.Second)
			g, err := s.Acquire(ctx, r)
			if err != nil {
				t.Fatalf("%v: Acquire(%q): %v", mode, text, err)
			}
			if info, err := s.Inspect(ctx, text); err != nil || !info.Held || info.Holder != text || info.Fence != g.Fence {
				t.Errorf("%v: Inspect(%q) = %+v, %v; want held by %q, fence %d", mode, text, info, err, text, g.Fence)
			}
			if err := s.Release(ctx, r); err != nil {
				t.Errorf("%v: Release(%q): %v", mode, text, err)
			}
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", table).Scan(&n); err != nil || n != 1 {
		t.Errorf("table %q: found %d, %v", table, n, err)
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE `"+strings.ReplaceAll(table, "`", "``")+"`"); err != nil {
		t.Errorf("drop: %v", err)
	}
}

// TestTimeZone: expiry is the server's clock in UTC, whatever the
// session's time zone.
func TestTimeZone(t *testing.T) {
	migratedDB(t)
	ctx := testCtx(t, 30*time.Second)
	cfg, err := mysql.ParseDSN(strings.TrimSpace(dsn(t)))
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	for _, tz := range []string{"'+10:00'", "'-11:00'"} {
		cfg.Params = map[string]string{"time_zone": tz}
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		s, err := mysqllease.New(db, mysqllease.WithNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		r := req("tz", tz, 10*time.Second)
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatalf("time_zone %s: Acquire: %v", tz, err)
		}
		info, err := s.Inspect(ctx, "tz")
		if err != nil || !info.Held || info.Remaining < 8*time.Second || info.Remaining > 10*time.Second {
			t.Errorf("time_zone %s: Inspect = %+v, %v; want held with 8-10s left", tz, info, err)
		}
		if err := s.Release(ctx, r); err != nil {
			t.Errorf("time_zone %s: Release: %v", tz, err)
		}
	}
}

// TestGetLockBreak: Break ends the holder's connection and returns once its
// lock is free, and the holder's renewal fails with lease.ErrBroken.
func TestGetLockBreak(t *testing.T) {
	db := migratedDB(t)
	ctx := testCtx(t, 30*time.Second)
	ns := namespace(t)
	holder, op := storeNS(t, db, mysqllease.ModeGetLock, ns), storeNS(t, db, mysqllease.ModeGetLock, ns)
	r := req("stuck", "h", time.Minute)
	g, err := holder.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	e, err := op.Break(ctx, "stuck")
	if err != nil || len(e.Holders) != 1 || e.Holders[0].Token != r.Token || e.Holders[0].Fence != g.Fence {
		t.Fatalf("Break = %+v, %v; want the holder's entry", e, err)
	}
	next := req("stuck", "next", time.Minute)
	g2, err := op.Acquire(ctx, next) // Break returns once the killed connection's lock is gone
	if err != nil || g2.Fence <= g.Fence {
		t.Fatalf("Acquire after Break = %+v, %v; want a larger fence than %d", g2, err, g.Fence)
	}
	if err := holder.Renew(ctx, r); !errors.Is(err, lease.ErrBroken) {
		t.Errorf("the evicted holder's Renew = %v, want lease.ErrBroken", err)
	}
	if err := op.Release(ctx, next); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// TestGetLockConnectionLoss: a lease's connection that ends frees its lock
// at once, and its renewal reports the loss (not a break).
func TestGetLockConnectionLoss(t *testing.T) {
	db := migratedDB(t)
	ctx := testCtx(t, 30*time.Second)
	ns := namespace(t)
	s, other := storeNS(t, db, mysqllease.ModeGetLock, ns), storeNS(t, db, mysqllease.ModeGetLock, ns)
	r := req("conn", "h", time.Minute)
	if _, err := s.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := db.QueryRowContext(ctx, "SELECT conn FROM leasekit_leases WHERE ns = ? AND k = ?", ns, "conn").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "KILL CONNECTION ?", id); err != nil {
		t.Fatal(err)
	}
	next := req("conn", "next", time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	_, err := other.Acquire(ctx, next)
	for ; errors.Is(err, lease.ErrHeld) && time.Now().Before(deadline); _, err = other.Acquire(ctx, next) {
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Acquire after the holder's connection ended: %v", err)
	}
	if err := s.Renew(ctx, r); !errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrBroken) {
		t.Errorf("Renew on the ended connection = %v, want lease.ErrNotHeld, not ErrBroken", err)
	}
	if err := other.Release(ctx, next); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// TestTLSParam: the driver's tls parameter reaches the connection (this
// server has TLS off, so the driver refuses instead of talking in clear).
func TestTLSParam(t *testing.T) {
	cfg, err := mysql.ParseDSN(dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	var have string
	db := openDB(t)
	ctx := testCtx(t, 10*time.Second)
	if err := db.QueryRowContext(ctx, "SELECT @@have_ssl").Scan(&have); err != nil || have == "YES" {
		t.Skipf("the server has TLS (%q, %v): covered by the conformance suite over a tls DSN", have, err)
	}
	cfg.TLSConfig = "skip-verify"
	tdb, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tdb.Close() }()
	s, err := mysqllease.New(tdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); !errors.Is(err, mysql.ErrNoTLS) {
		t.Errorf("Migrate over tls=skip-verify to a server without TLS = %v, want mysql.ErrNoTLS", err)
	}
}
