// The k8s:// scheme: k8slease over client-go.

package leaseurl

import (
	"context"
	"net/url"
	"strings"

	leasesv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/k8slease"
)

func init() { Register("k8s", openK8s) }

// k8sQPS lifts client-go's default limit of 5 requests a second (burst 10),
// which a few clients renewing leases would reach.
const k8sQPS = 1000

// openK8s opens k8s:///NAMESPACE[?kubeconfig=PATH][&context=NAME][&prefix=P][&max_waiters=N]:
// Lease objects in NAMESPACE (empty: the context's namespace, else
// "default"), through the kubeconfig at PATH (default: $KUBECONFIG or
// ~/.kube/config, else the pod's in-cluster service account).
func openK8s(ctx context.Context, u *url.URL, o *Options) (driver.Store, func() error, error) {
	if u.Host != "" {
		return nil, nil, lease.Invalid("store", "k8s URLs name no host (k8s:///namespace): the kubeconfig names the apiserver")
	}
	q := u.Query()
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = q.Get("kubeconfig")
	over := &clientcmd.ConfigOverrides{CurrentContext: q.Get("context")}
	q.Del("kubeconfig")
	q.Del("context")
	if len(q) > 0 {
		return nil, nil, lease.Invalid("store", "k8s URLs take no options besides kubeconfig, context, prefix and max_waiters")
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, over)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, err
	}
	cfg.QPS, cfg.Burst = k8sQPS, 2*k8sQPS
	ns := strings.Trim(u.Path, "/")
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, nil, err
		}
	}
	cs, err := leasesv1.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	var opts []k8slease.Option
	if p, ok := o.Take("prefix"); ok {
		opts = append(opts, k8slease.WithPrefix(p))
	}
	if n, ok, err := o.maxWaiters(); err != nil {
		return nil, nil, err
	} else if ok {
		opts = append(opts, k8slease.WithMaxWaiters(n))
	}
	s, err := k8slease.New(cs, ns, opts...)
	if err != nil {
		return nil, nil, err
	}
	return s, nil, nil
}
