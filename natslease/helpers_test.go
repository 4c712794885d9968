// Test helpers: the server's address, connections, stores and contexts.

package natslease_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/natslease"
)

// testBucket is the bucket the tests of this process share on the shared
// server, each in its own namespace; TestMain deletes it.
var testBucket = "leasetest-" + randHex(4)

func TestMain(m *testing.M) {
	code := m.Run()
	if u := os.Getenv("LEASE_TEST_NATS_URL"); u != "" {
		if nc, err := nats.Connect(u); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if js, err := jetstream.New(nc); err == nil {
				_ = js.DeleteKeyValue(ctx, testBucket) // missing if no test made a store
			}
			cancel()
			nc.Close()
		}
	}
	os.Exit(code)
}

// natsURL returns LEASE_TEST_NATS_URL, or skips the test.
func natsURL(t testing.TB) string {
	t.Helper()
	return leasetest.Env(t, "LEASE_TEST_NATS_URL")
}

// connect opens a connection to url, closed at cleanup.
func connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// newStore returns a store over js in namespace ns of testBucket.
func newStore(t testing.TB, js jetstream.JetStream, ns string) *natslease.Store {
	t.Helper()
	s, err := natslease.New(testCtx(t, 10*time.Second), js, natslease.WithBucket(testBucket), natslease.WithNamespace(ns))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// testCtx returns a context that ends after d or at cleanup.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testNS returns a fresh namespace.
func testNS() string { return "t" + randHex(4) }

// randHex returns 2n random hex characters.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
