// Private servers with TLS and a password, or a token: the store works over
// a connection that has them and none is made without.

package natslease_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/leasekit/lease/internal/testcert"
	"github.com/leasekit/lease/leaseurl"
)

const password = "s3cr3t-PW"

// acquireOver opens a store over a connection with opts, and acquires a key.
func acquireOver(t *testing.T, url string, opts ...nats.Option) {
	t.Helper()
	_, js := connect(t, url, opts...)
	s := newStore(t, js, "auth")
	if _, err := s.Acquire(testCtx(t, 10*time.Second), req("k-"+randHex(4), "a", time.Second)); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
}

func TestTLSAndPassword(t *testing.T) {
	t.Parallel()
	certs := testcert.New(t, filepath.Join(t.TempDir(), "certs"), "client")
	srv := startServer(t, "--user", "leasekit", "--pass", password, "--tls", "--tlscert", certs.ServerCert, "--tlskey", certs.ServerKey)
	acquireOver(t, srv.url, nats.Secure(certs.ClientTLS(false)), nats.UserInfo("leasekit", password))
	for name, opts := range map[string][]nats.Option{
		"without TLS":      {nats.UserInfo("leasekit", password)},
		"without password": {nats.Secure(certs.ClientTLS(false))},
		"wrong password":   {nats.Secure(certs.ClientTLS(false)), nats.UserInfo("leasekit", "wrong")},
	} {
		if nc, err := nats.Connect(srv.url, append(opts, nats.Timeout(5*time.Second))...); err == nil {
			nc.Close()
			t.Errorf("a connection %s was accepted", name)
		}
	}
	// natss:// verifies the server's certificate with the system's roots,
	// which do not hold the test CA; the error hides the password.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := strings.Replace(srv.url, "nats://", "natss://leasekit:"+password+"@", 1)
	if s, err := leaseurl.Open(ctx, u); err == nil {
		_ = s.Close()
		t.Errorf("natss:// with an untrusted certificate opened a store")
	} else if strings.Contains(err.Error(), password) {
		t.Errorf("the error shows the password: %v", err)
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--auth", password)
	acquireOver(t, srv.url, nats.Token(password))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := leaseurl.Open(ctx, srv.url+"/tokens?token="+password)
	if err != nil {
		t.Fatalf("Open with token=: %v", err)
	}
	_ = s.Close()
	if s, err := leaseurl.Open(ctx, srv.url+"/tokens?token=wrong"); err == nil {
		_ = s.Close()
		t.Errorf("Open with a wrong token succeeded")
	} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(err.Error(), "uthorization") {
		t.Errorf("Open with a wrong token: %v, want an authorization error", err)
	}
}
