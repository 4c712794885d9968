// postgres:// URLs without sslmode verify the server's certificate when the
// host is not loopback (issue #28, item 7).

package leaseurl_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/pgtest"
	"github.com/leasekit/lease/leaseurl"
)

// TestPostgresDefaultSSLMode: which URLs get sslmode=verify-full by default,
// and what pgx then does (no certificate check skipped, no plain-text
// fallback), without a server.
func TestPostgresDefaultSSLMode(t *testing.T) {
	for _, env := range []string{"PGSSLMODE", "PGSERVICE", "PGHOST"} {
		t.Setenv(env, "")
	}
	for _, tc := range []struct {
		url    string
		verify bool // verify-full added by default
	}{
		{"postgres://u:pw@db.example.com/x", true},
		{"postgresql://u@10.0.0.5:5432/x?connect_timeout=5", true},
		{"postgres://u@127.0.0.1:5433,db.example.com:5432/x", true},
		{"postgres://u@127.0.0.1/x", false},
		{"postgres://u@127.0.0.2/x", false},
		{"postgres://u@localhost/x", false},
		{"postgres://u@[::1]:5432/x", false},
		{"postgres://u@/x?host=/tmp", false},
		{"postgres://u@/x", false}, // pgx's default: a unix socket, else localhost
		{"postgres://u@db.example.com/x?sslmode=prefer", false},
		{"postgres://u@db.example.com/x?sslmode=disable", false},
		{"postgres://u@db.example.com/x?ssl=true", false},
	} {
		cfg, verify, err := leaseurl.PostgresConfig(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if verify != tc.verify {
			t.Errorf("%s: verify-full by default = %v, want %v", tc.url, verify, tc.verify)
		}
		if !verify {
			continue
		}
		c := cfg.ConnConfig
		if c.TLSConfig == nil || c.TLSConfig.InsecureSkipVerify {
			t.Errorf("%s: first attempt TLS %+v, want verified TLS", tc.url, c.TLSConfig)
		}
		for _, f := range c.Fallbacks {
			if f.TLSConfig == nil || f.TLSConfig.InsecureSkipVerify {
				t.Errorf("%s: fallback to %s without verified TLS", tc.url, f.Host)
			}
		}
	}
	// The environment's sslmode, and a service, are the user's choice.
	t.Setenv("PGSSLMODE", "require")
	if _, verify, err := leaseurl.PostgresConfig("postgres://u@db.example.com/x"); err != nil || verify {
		t.Errorf("with PGSSLMODE=require: verify-full by default = %v, %v; want PGSSLMODE honoured", verify, err)
	}
	t.Setenv("PGSSLMODE", "")
	t.Setenv("PGHOST", "db.example.com")
	if _, verify, err := leaseurl.PostgresConfig("postgres://u@/x"); err != nil || !verify {
		t.Errorf("with PGHOST=db.example.com: verify-full by default = %v, %v; want true", verify, err)
	}
}

// TestPostgresDefaultVerifyFull starts a private PostgreSQL with TLS only,
// under a certificate from a throw-away CA, listening on loopback and on
// one of this host's other addresses. Over that address a URL without
// sslmode must refuse the server (before the fix, pgx's default prefer
// connected: TLS without verification); sslmode=prefer connects as asked,
// sslrootcert with the CA connects verified, and loopback keeps prefer.
func TestPostgresDefaultVerifyFull(t *testing.T) {
	for _, env := range []string{"PGSSLMODE", "PGSERVICE", "PGHOST"} {
		t.Setenv(env, "")
	}
	ip := nonLoopbackIPv4(t)
	certs, hba := pgtest.TLSFiles(t, fmt.Sprintf("hostssl all all 127.0.0.1/32 trust\nhostssl all all %s/32 trust\nlocal all all trust\n", ip), ip)
	pg := pgtest.Start(t, "fsync=off", "ssl=on", "listen_addresses=127.0.0.1,"+ip.String(),
		"ssl_cert_file="+certs.ServerCert, "ssl_key_file="+certs.ServerKey,
		"hba_file="+hba)

	const pw = "s3cret-Pw9"
	remote := fmt.Sprintf("postgres://postgres:%s@%s:%d/postgres?connect_timeout=5&namespace=tls", pw, ip, pg.Port())
	open := func(url string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := leaseurl.Open(ctx, url)
		if err == nil {
			_ = s.Close()
		}
		return err
	}

	err := open(remote)
	if err == nil {
		t.Fatalf("a postgres:// URL without sslmode connected to %s, whose certificate fails verify-full", ip)
	}
	if strings.Contains(err.Error(), pw) {
		t.Errorf("the error shows the password: %v", err)
	}
	if !strings.Contains(err.Error(), "verify-full") {
		t.Errorf("the error does not say that verify-full was the default: %v", err)
	}
	t.Logf("refused as expected: %v", err)

	if err := open(remote + "&sslmode=prefer"); err != nil {
		t.Errorf("an explicit sslmode=prefer was not honoured: %v", err)
	}
	if err := open(remote + "&sslrootcert=" + certs.CAFile); err != nil {
		t.Errorf("without sslmode, with the server's CA as sslrootcert: %v", err)
	}
	loopback := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=5&namespace=tls", pg.Port())
	if err := open(loopback); err != nil {
		t.Errorf("loopback without sslmode (pgx's default prefer): %v", err)
	}
}

// nonLoopbackIPv4 returns an IPv4 address of this host that is not
// loopback. A host with none (a bare network namespace) gets one for the
// test, as root: 198.18.0.N/32 (a benchmarking range, RFC 2544) on the
// loopback interface, removed at cleanup. Otherwise the test skips.
func nonLoopbackIPv4(t *testing.T) net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip := n.IP.To4(); ip != nil && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				return ip
			}
		}
	}
	ipBin, err := exec.LookPath("ip")
	if err != nil {
		ipBin = "/usr/sbin/ip"
	}
	if os.Geteuid() == 0 {
		ip := net.IPv4(198, 18, 0, byte(10+os.Getpid()%200)).To4()
		cidr := ip.String() + "/32"
		out, err := exec.Command(ipBin, "addr", "add", cidr, "dev", "lo").CombinedOutput()
		if err == nil {
			t.Cleanup(func() { _ = exec.Command(ipBin, "addr", "del", cidr, "dev", "lo").Run() })
			return ip
		}
		t.Logf("ip addr add %s dev lo: %v: %s", cidr, err, out)
	}
	t.Skip("this host has no IPv4 address besides loopback: TestPostgresDefaultSSLMode covers the rule")
	return nil
}
