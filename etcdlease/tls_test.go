// Security: etcd over https with client certificates (a private member with
// a generated CA and --client-cert-auth): a client without a certificate,
// or that does not trust the server, gets nothing; with both, the store
// works.

package etcdlease_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/etcdlease"
	"github.com/leasekit/lease/internal/testcert"
	"github.com/leasekit/lease/internal/testport"
)

func TestTLSWithClientCertificates(t *testing.T) {
	t.Parallel() // private servers; after the conformance suite, whose leak check sees the whole process
	bin := etcdBin(t)
	dir := t.TempDir()
	certs := testcert.New(t, filepath.Join(dir, "certs"), "leasekit")
	ports := testport.Free(t, 2)
	client := fmt.Sprintf("https://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--name", "tls", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "tls="+peer, "--initial-cluster-state", "new",
		"--cert-file", certs.ServerCert, "--key-file", certs.ServerKey,
		"--trusted-ca-file", certs.CAFile, "--client-cert-auth",
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("etcd log:\n%s", b)
		}
	})

	dial := func(tc *tls.Config) *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, TLS: tc, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatalf("clientv3.New: %v", err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		return cli
	}
	good := dial(certs.ClientTLS(true))
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := good.Get(ctx, "ready")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd over TLS not ready after 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for name, tc := range map[string]*tls.Config{
		"no client certificate":   certs.ClientTLS(false),
		"server not trusted (CA)": {MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{certs.Client}},
	} {
		s, err := etcdlease.New(dial(tc), etcdlease.WithPrefix("/tls-test/"))
		if err != nil {
			t.Fatal(err)
		}
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = s.Acquire(actx, driver.Request{Key: "k", Token: randHex(16), Holder: "h", TTL: 3 * time.Second})
		acancel()
		if err == nil || errors.Is(err, lease.ErrHeld) {
			t.Errorf("%s: Acquire = %v, want a connection error", name, err)
		}
		_ = s.Close()
	}

	s, err := etcdlease.New(good, etcdlease.WithPrefix("/tls-test/"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := driver.Request{Key: "k", Token: randHex(16), Holder: "h", TTL: 3 * time.Second}
	g, err := s.Acquire(ctx, r)
	if err != nil {
		t.Fatalf("Acquire over TLS with a client certificate: %v", err)
	}
	if err := s.Renew(ctx, r); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if info, err := s.Inspect(ctx, r.Key); err != nil || !info.Held || info.Fence != g.Fence {
		t.Fatalf("Inspect = %+v, %v; want held with fence %d", info, err, g.Fence)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
