// Security: PostgreSQL over TLS (a private server with ssl=on, a generated
// CA and an hba file that rejects unencrypted connections); table names,
// namespaces, keys and holders full of SQL-significant characters, which
// must stay inert data; forged announcements, which must grant nothing.

package pglease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/pgtest"
	"github.com/leasekit/lease/internal/testcert"
	"github.com/leasekit/lease/leasetest"
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
	var after int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM leasekit_leases").Scan(&after); err != nil || after < before {
		t.Fatalf("the shared lease table after the hostile names: %d rows (was %d), %v", after, before, err)
	}
}

// TestForgedHandOffGrantsNothing (docs/SECURITY.md item 2): a role that may
// only SELECT the tables reads the head of a key's queue and calls
// pg_notify on the store's channel as a release would, naming that waiter.
// The waiter is woken but granted nothing, through the Store or a waiting
// lease.Client: the key stays its holder's, and the waiter gets it, with
// the server's fence, only after the real release. The shared server's role
// may not create roles, so the test runs on a private server.
func TestForgedHandOffGrantsNothing(t *testing.T) {
	pg := startPrivatePG(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			pool := newPool(t, pg.DSN(), 8)
			migrate(t, pool)
			sA := newStore(t, pool, mode)
			sB := storeNS(t, pool, mode, sA.Namespace())
			forger := selectOnlyPool(t, ctx, pg, sA)
			forge := func(key string) string {
				var head string
				err := forger.QueryRow(ctx, "SELECT token FROM "+sA.QueueTable()+" WHERE ns = $1 AND key = $2 ORDER BY seq LIMIT 1",
					sA.Namespace(), key).Scan(&head)
				if errors.Is(err, pgx.ErrNoRows) {
					return ""
				} else if err != nil {
					t.Fatalf("the forger reads the queue: %v", err)
				}
				if _, err := forger.Exec(ctx, "UPDATE "+sA.Table()+" SET token = $1", head); err == nil {
					t.Fatal("the SELECT-only role could UPDATE the lease table")
				}
				if _, err := forger.Exec(ctx, "SELECT pg_notify($1, $2)", sA.Channel(), head+"\n"+key); err != nil {
					t.Fatalf("the forger notifies: %v", err)
				}
				return head
			}
			// Through the Store.
			sub := subscribe(t, ctx, sB)
			a, b := req("k", "A", 10*time.Second), req("k", "B", 10*time.Second)
			ga, err := sA.Acquire(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			leasetest.Queued(t, ctx, sB, b, 0)
			if head := forge("k"); head != b.Token {
				t.Fatalf("the forger read %q first in the queue, want B's %q", head, b.Token)
			}
			if an, err := nextAnnouncement(t, ctx, sub, 10*time.Second); err != nil || an.Next != b.Token {
				t.Fatalf("B's store heard %+v, %v; want the forged announcement naming B", an, err)
			}
			b.Queue = true
			if _, err := sB.Acquire(ctx, b); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("B's Acquire after the forged announcement: %v, want ErrHeld", err)
			}
			if info, err := sA.Inspect(ctx, "k"); err != nil || info.Holder != "A" || info.Fence != ga.Fence {
				t.Fatalf("after the forgery: Inspect = %+v, %v; want A with fence %d", info, err, ga.Fence)
			}
			if err := sA.Release(ctx, a); err != nil {
				t.Fatal(err)
			}
			if gb, err := sB.Acquire(ctx, b); err != nil || gb.Fence != ga.Fence+1 {
				t.Fatalf("B's Acquire after A's release = %+v, %v; want the server's fence %d", gb, err, ga.Fence+1)
			}

			// Through a waiting Client.
			a = req("c", "A", 10*time.Second)
			if ga, err = sA.Acquire(ctx, a); err != nil {
				t.Fatal(err)
			}
			c := newClient(t, sB)
			got := make(chan *lease.Lease, 1)
			go func() {
				l, err := c.Acquire(ctx, "c")
				if err != nil {
					t.Errorf("the Client's Acquire: %v", err)
				}
				got <- l
			}()
			for deadline := time.Now().Add(10 * time.Second); forge("c") == ""; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the Client's waiter was not queued within 10s")
				}
			}
			select {
			case <-got:
				t.Fatal("the Client acquired after a forged announcement, while A holds the key")
			case <-time.After(time.Second):
			}
			if err := sA.Release(ctx, a); err != nil {
				t.Fatal(err)
			}
			if l := <-got; l == nil || l.Fence() != ga.Fence+1 {
				t.Fatalf("the Client's lease after A's release: %v; want the server's fence %d", l, ga.Fence+1)
			}
		})
	}
}

// selectOnlyPool creates on pg a role that may log in and SELECT s's tables,
// and nothing else, and returns a pool logged in as it.
func selectOnlyPool(t *testing.T, ctx context.Context, pg *privatePG, s pglease.Store) *pgxpool.Pool {
	t.Helper()
	admin := newPool(t, pg.DSN(), 2)
	role := "leasekit_forger_" + randHex(4)
	for _, q := range []string{"CREATE ROLE " + role + " LOGIN", "GRANT SELECT ON " + s.Table() + ", " + s.QueueTable() + " TO " + role} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, q := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			_, _ = admin.Exec(context.Background(), q)
		}
	})
	return newPool(t, strings.Replace(pg.DSN(), "//postgres@", "//"+role+"@", 1), 2)
}
