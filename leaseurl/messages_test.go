// The exact one-line errors Open returns for an unknown scheme, an
// unreachable PostgreSQL and a missing table with migrate=false, and
// RedactText.

package leaseurl_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/leaseurl"
)

func openErr(t *testing.T, rawURL string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := leaseurl.Open(ctx, rawURL)
	if err == nil {
		_ = s.Close()
		t.Fatalf("Open(%q) succeeded", leaseurl.Redact(rawURL))
	}
	return err.Error()
}

func TestOpenErrorMessages(t *testing.T) {
	schemes := strings.Join(leaseurl.Schemes(), ", ")
	for _, tc := range []struct{ url, want string }{
		{"gopher://u:" + secret + "@x/", `leaseurl: unsupported store URL scheme "gopher" in "gopher://u:xxxxx@x/" (want one of ` + schemes + `)`},
		// Connecting is the step that fails, not the migration; pgx's
		// error, one line per address, is put on one line.
		{"postgres://u:" + secret + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=5",
			`leaseurl: open postgres store "postgres://u:xxxxx@127.0.0.1:1/db?sslmode=disable&connect_timeout=5": connect: ` +
				"failed to connect to `user=u database=db`: 127.0.0.1:1 (127.0.0.1): dial error: dial tcp 127.0.0.1:1: connect: connection refused"},
	} {
		if got := openErr(t, tc.url); got != tc.want {
			t.Errorf("Open(%q):\n got %s\nwant %s", leaseurl.Redact(tc.url), got, tc.want)
		}
	}
}

func TestPostgresMigrateFalseMissingTable(t *testing.T) {
	dsn := leasetest.Env(t, "LEASE_TEST_POSTGRES_DSN")
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	table := fmt.Sprintf("leaseurl_missing_%d", time.Now().UnixNano())
	u := dsn + sep + "migrate=false&table=" + table
	want := fmt.Sprintf(`leaseurl: open postgres store %q: table "%s" does not exist and migrate=false: `+
		"drop migrate=false to create it, or call pglease's Store.Migrate", leaseurl.Redact(u), table)
	if got := openErr(t, u); got != want {
		t.Errorf("Open:\n got %s\nwant %s", got, want)
	}
	// The default table, which the test servers have, opens with migrate=false.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s, err := leaseurl.Open(ctx, dsn+sep+"migrate=true"); err != nil {
		t.Fatal(err)
	} else {
		_ = s.Close()
	}
	s, err := leaseurl.Open(ctx, dsn+sep+"migrate=false")
	if err != nil {
		t.Fatalf("Open with migrate=false and the table present: %v", err)
	}
	_ = s.Close()
}

func TestRedactText(t *testing.T) {
	u := "redis://user:" + secret + "@h:1/?prefix=p:"
	got := leaseurl.RedactText("dial "+u+" as user:"+secret+" failed", u)
	if want := "dial redis://user:xxxxx@h:1/?prefix=p: as user:xxxxx failed"; got != want {
		t.Errorf("RedactText = %q, want %q", got, want)
	}
}
