// The k8s:// scheme.

package leaseurl_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/k8slease"
	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/leaseurl"
)

func TestK8s(t *testing.T) {
	kc := leasetest.Env(t, "LEASE_TEST_K8S_KUBECONFIG")
	shareKeys(t, fmt.Sprintf("k8s:///default?kubeconfig=%s&prefix=leaseurl-%d.", url.QueryEscape(kc), time.Now().UnixNano()))
}

// TestK8sURLErrors: what a k8s URL may say, checked before any request (the
// kubeconfig names an apiserver nobody listens on).
func TestK8sURLErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: team-a}}]
current-context: x
`
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	q := url.QueryEscape(kc)
	s, err := leaseurl.Open(ctx, "k8s://?kubeconfig="+q+"&prefix=app.&max_waiters=3")
	if err != nil {
		t.Fatalf("Open with the context's namespace: %v", err)
	}
	if ks, ok := leaseurl.Unwrap(s).(*k8slease.Store); !ok || ks.Prefix() != "app." || ks.Caps().MaxWaiters != 3 {
		t.Errorf("Open = %T, want a *k8slease.Store with prefix app. and max_waiters 3", leaseurl.Unwrap(s))
	}
	_ = s.Close()
	for _, u := range []string{
		"k8s://apiserver:6443/default?kubeconfig=" + q, // the kubeconfig names the server
		"k8s:///default?kubeconfig=" + q + "&verbose=1",
		"k8s:///default?kubeconfig=" + q + "&prefix=Bad/Prefix",
		"k8s:///default?kubeconfig=" + q + "&max_waiters=0",
	} {
		if s, err := leaseurl.Open(ctx, u); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Open(%s) = %v, %v; want ErrInvalid", u, s, err)
		}
	}
	if _, err := leaseurl.Open(ctx, "k8s:///default?kubeconfig="+url.QueryEscape(kc+".missing")); err == nil {
		t.Errorf("Open with a missing kubeconfig: no error")
	}
}
