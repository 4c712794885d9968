// The mysql:// scheme: both modes on the test server, the driver's
// parameters and TLS default, and passwords kept out of errors.

package leaseurl_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/leaseurl"
)

// mysqlURL turns LEASE_TEST_MYSQL_DSN, a go-sql-driver DSN, into a
// mysql:// URL.
func mysqlURL(t *testing.T) string {
	cfg, err := mysql.ParseDSN(leasetest.Env(t, "LEASE_TEST_MYSQL_DSN"))
	if err != nil {
		t.Fatalf("LEASE_TEST_MYSQL_DSN: %v", err)
	}
	u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd == "" {
		u.User = url.User(cfg.User)
	}
	return u.String()
}

func TestMySQL(t *testing.T) {
	base := mysqlURL(t)
	for _, mode := range []string{"table", "getlock"} {
		t.Run(mode, func(t *testing.T) {
			shareKeys(t, fmt.Sprintf("%s?mode=%s&namespace=leaseurl-%d&table=leasekit_leaseurl", base, mode, time.Now().UnixNano()))
		})
	}
}

func TestMySQLErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const secret = "s3cr3t-pw"
	for _, tc := range []struct {
		url  string
		want error
	}{
		{"mysql://u:" + secret + "@127.0.0.1:1/db?mode=sideways", lease.ErrInvalid},
		{"mysql://u:" + secret + "@127.0.0.1:1/db?table=a.b.c", lease.ErrInvalid},
		{"mysql://u:" + secret + "@127.0.0.1:1/db?timeout=1s", nil}, // refused: port 1
	} {
		s, err := leaseurl.Open(ctx, tc.url)
		if err == nil {
			_ = s.Close()
			t.Errorf("Open(%q) succeeded", leaseurl.Redact(tc.url))
			continue
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Open(%q) = %v, want %v", leaseurl.Redact(tc.url), err, tc.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Open error contains the password: %v", err)
		}
	}
	if got := leaseurl.Redact("mysql://u:" + secret + "@h:3306/db?mode=getlock"); strings.Contains(got, secret) {
		t.Errorf("Redact = %q", got)
	}
}

// TestMySQLConfig: the driver's parameters pass through; TLS is verified by
// default for a host that is not loopback; parameters are bound on the
// client (interpolateParams) unless the URL says otherwise.
func TestMySQLConfig(t *testing.T) {
	for _, tc := range []struct {
		url, tls     string
		interpolate  bool
		addr, dbname string
	}{
		{"mysql://u:p%40ss@db.example:3307/app", "true", true, "db.example:3307", "app"},
		{"mysql://u@127.0.0.1/app?interpolateParams=false", "", false, "127.0.0.1:3306", "app"},
		{"mysql://u@localhost/app?tls=skip-verify", "skip-verify", true, "localhost:3306", "app"},
		{"mysql://u@db.example/app?tls=false", "false", true, "db.example:3306", "app"},
	} {
		u, _ := url.Parse(tc.url)
		cfg, err := leaseurl.MySQLConfig(u)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if cfg.TLSConfig != tc.tls || cfg.InterpolateParams != tc.interpolate || cfg.Addr != tc.addr || cfg.DBName != tc.dbname {
			t.Errorf("%s: tls %q interpolate %v addr %q db %q; want %q %v %q %q", tc.url, cfg.TLSConfig, cfg.InterpolateParams,
				cfg.Addr, cfg.DBName, tc.tls, tc.interpolate, tc.addr, tc.dbname)
		}
	}
	u, _ := url.Parse("mysql://u:p%40ss@db.example/app")
	if cfg, _ := leaseurl.MySQLConfig(u); cfg.User != "u" || cfg.Passwd != "p@ss" {
		t.Errorf("user %q password %q, want u and p@ss", cfg.User, cfg.Passwd)
	}
}
