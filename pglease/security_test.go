// Security: PostgreSQL over TLS (a private server with ssl=on, a generated
// CA and an hba file that rejects unencrypted connections), and table names,
// namespaces, keys and holders full of SQL-significant characters, which
// must stay inert data.

package pglease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/pgtest"
	"github.com/leasekit/lease/internal/testcert"
	"github.com/leasekit/lease/pglease"
)

func TestTLSRequired(t *testing.T) {
	certs, hba := pgtest.TLSFiles(t, "hostssl all all 127.0.0.1/32 trust\nhostnossl all all 0.0.0.0/0 reject\nlocal all all trust\n")
	pg := startPrivatePG(t, "fsync=off", "ssl=on",
		"ssl_cert_file="+certs.ServerCert, "ssl_key_file="+certs.ServerKey, "ssl_ca_file="+certs.CAFile,
		"hba_file="+hba)
	ctx := testCtx(t, 60*time.Second)
	base := strings.TrimSuffix(pg.DSN(), "?sslmode=disable&connect_timeout=5")

	// Without TLS the server refuses; with another CA the client does.
	plain := newPool(t, base+"?sslmode=disable&connect_timeout=5", 2)
	if err := plain.Ping(ctx); err == nil {
		t.Fatal("a connection without TLS was accepted")
	}
	otherCA := testcert.New(t, t.TempDir(), "postgres").CAFile
	unverified := newPool(t, base+"?sslmode=verify-full&connect_timeout=5&sslrootcert="+otherCA, 2)
	if err := unverified.Ping(ctx); err == nil {
		t.Fatal("verify-full with another CA connected")
	}

	pool := newPool(t, base+"?sslmode=verify-full&connect_timeout=5&sslrootcert="+certs.CAFile, 4)
	var ssl bool
	if err := pool.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
		t.Fatalf("pg_stat_ssl for our session: ssl=%v, %v; want an encrypted session", ssl, err)
	}
	for _, mode := range []pglease.Mode{pglease.ModeTable, pglease.ModeAdvisory} {
		s, err := pglease.New(pool, pglease.WithMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate over TLS: %v", err)
		}
		r := req("tls-"+mode.String(), "h", 5*time.Second)
		if _, err := s.Acquire(ctx, r); err != nil {
			t.Fatalf("%v: Acquire over TLS: %v", mode, err)
		}
		if err := s.Renew(ctx, r); err != nil {
			t.Fatalf("%v: Renew over TLS: %v", mode, err)
		}
		if err := s.Release(ctx, r); err != nil {
			t.Fatalf("%v: Release over TLS: %v", mode, err)
		}
		_ = s.Close()
	}
}

// sqlTexts would do harm if a store pasted them into SQL.
var sqlTexts = []string{
	`'); DROP TABLE leasekit_leases; --`,
	`x' OR '1'='1`,
	`"; DELETE FROM leasekit_leases; --`,
	`$1`, `$$; DROP TABLE leasekit_leases; $$`, `\'; SELECT pg_sleep(10); --`,
	"E'\\x00'", "%", "_", "ключ 🔒",
}

func TestSQLInjectionInert(t *testing.T) {
	pool := sharedPool(t)
	ctx := testCtx(t, 60*time.Second)
	var before int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM leasekit_leases").Scan(&before); err != nil {
		t.Fatalf("the shared lease table: %v", err)
	}
	for _, mode := range []pglease.Mode{pglease.ModeTable, pglease.ModeAdvisory} {
		for i, text := range sqlTexts {
			s := storeNS(t, pool, mode, namespace(t)+text)
			key := text
			holder := "holder " + text
			r := driver.Request{Key: key, Token: token(), Holder: holder, TTL: 5 * time.Second}
			g, err := s.Acquire(ctx, r)
			if err != nil {
				t.Fatalf("%v #%d: Acquire(%q): %v", mode, i, key, err)
			}
			if _, err := s.Acquire(ctx, driver.Request{Key: key, Token: token(), Holder: "x", TTL: time.Second}); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("%v: second Acquire(%q) = %v, want ErrHeld", mode, key, err)
			}
			info, err := s.Inspect(ctx, key)
			if err != nil || !info.Held || info.Holder != holder || info.Fence != g.Fence {
				t.Fatalf("%v: Inspect(%q) = %+v, %v; want held by %q, fence %d", mode, key, info, err, holder, g.Fence)
			}
			if err := s.Release(ctx, r); err != nil {
				t.Fatalf("%v: Release(%q): %v", mode, key, err)
			}
		}
	}
	// Table names are identifiers, quoted: hostile ones name odd tables, nothing more.
	for _, name := range []string{`leases"; DROP TABLE leasekit_leases; --`, `a'b`, `x.y"z`} {
		s, err := pglease.New(pool, pglease.WithTable(name), pglease.WithNamespace(namespace(t)))
		if err != nil {
			if !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("WithTable(%q) = %v, want a store or ErrInvalid", name, err)
			}
			continue
		}
		err = s.Migrate(ctx)
		if err == nil {
			if _, err := pool.Exec(ctx, "DROP TABLE "+s.Table()); err != nil {
				t.Fatalf("dropping the test table %s: %v", s.Table(), err)
			}
		} else if !strings.Contains(err.Error(), "schema") {
			t.Fatalf("Migrate with table %q: %v", name, err)
		}
		_ = s.Close()
	}
	var after int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM leasekit_leases").Scan(&after); err != nil || after < before {
		t.Fatalf("the shared lease table after the hostile names: %d rows (was %d), %v", after, before, err)
	}
}
