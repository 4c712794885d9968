// Test helpers: the apiserver's client, stores and bounded contexts.

package k8slease_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasekit/lease/k8slease"
	"github.com/leasekit/lease/leasetest"
)

// namespace is the Kubernetes namespace of the tests' Lease objects.
const namespace = "default"

// restConfig returns the config of LEASE_TEST_K8S_KUBECONFIG, skipping the
// test when it is unset; without client-go's default limit of 5 requests a
// second.
func restConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", leasetest.Env(t, "LEASE_TEST_K8S_KUBECONFIG"))
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 5000, 5000
	return cfg
}

var (
	sharedOnce sync.Once
	shared     kubernetes.Interface
	sharedErr  error
)

// client returns one clientset for the whole package, made and used once
// before any test's leak check, so that its HTTP/2 connection's goroutines
// predate them.
func client(t testing.TB) kubernetes.Interface {
	t.Helper()
	cfg := restConfig(t)
	sharedOnce.Do(func() {
		var cs *kubernetes.Clientset
		if cs, sharedErr = kubernetes.NewForConfig(cfg); sharedErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, sharedErr = cs.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{Limit: 1})
			shared = cs
		}
	})
	if sharedErr != nil {
		t.Fatalf("the apiserver: %v", sharedErr)
	}
	return shared
}

// newStore returns a store over cs with prefix.
func newStore(t testing.TB, cs kubernetes.Interface, prefix string, opts ...k8slease.Option) *k8slease.Store {
	t.Helper()
	s, err := k8slease.New(cs.CoordinationV1(), namespace, append([]k8slease.Option{k8slease.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("k8slease.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// testPrefix returns the name prefix made of name (a suite's namespace).
func testPrefix(name string) string {
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return "lt-" + strings.Trim(name, "-") + "."
}

// freshPrefix returns a fresh name prefix for test t.
func freshPrefix(t testing.TB) string { return testPrefix(t.Name() + "-" + randHex(4)) }

// randHex returns 2n random hex characters.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testCtx returns a context cancelled after d or at cleanup.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
