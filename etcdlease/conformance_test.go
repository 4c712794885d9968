// The conformance suite on the single etcd node of ./scripts/test.

package etcdlease_test

import "testing"

func TestConformance(t *testing.T) {
	runSuite(t, newCli(t, endpoints(t)))
}
