// Package testcert makes a throw-away certificate authority with a server
// certificate (for 127.0.0.1 and localhost) and a client certificate, for
// tests that start private TLS servers.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Set is a CA and two certificates signed by it, as PEM files in Dir.
type Set struct {
	Dir                   string
	CAFile                string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	Pool                  *x509.CertPool
	Client                tls.Certificate
}

// New writes a fresh Set into dir (created with mode 0700 if missing); key
// files are 0600. clientCN is the client certificate's common name (etcd
// uses it as the user name); serverIPs are addresses the server certificate
// is valid for besides 127.0.0.1.
func New(t testing.TB, dir, clientCN string, serverIPs ...net.IP) *Set {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	caKey, _, caDER := make1(t, nil, nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "leasekit test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	s := &Set{Dir: dir, Pool: x509.NewCertPool()}
	s.Pool.AddCert(ca)
	s.CAFile = write(t, dir, "ca.pem", "CERTIFICATE", caDER)
	_, srvKey, srvDER := make1(t, ca, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "127.0.0.1"}, DNSNames: []string{"localhost"},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1)}, serverIPs...),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	s.ServerCert = write(t, dir, "server.pem", "CERTIFICATE", srvDER)
	s.ServerKey = write(t, dir, "server-key.pem", "PRIVATE KEY", srvKey)
	_, cliKey, cliDER := make1(t, ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: clientCN},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	s.ClientCert = write(t, dir, "client.pem", "CERTIFICATE", cliDER)
	s.ClientKey = write(t, dir, "client-key.pem", "PRIVATE KEY", cliKey)
	s.Client, err = tls.LoadX509KeyPair(s.ClientCert, s.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ClientTLS returns a client configuration that trusts the CA and, when
// withCert, presents the client certificate.
func (s *Set) ClientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: s.Pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}
	if withCert {
		c.Certificates = []tls.Certificate{s.Client}
	}
	return c
}

var serial int64

func make1(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano() + serial)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return key, keyDER, der
}

func write(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
